"""`pgkick dev`: the local serverless stack (Lambda Invoke API + EventBridge Scheduler API)."""
