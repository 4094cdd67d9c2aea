"""What an app calls: validate, insert (alone, grouped, in the app's transaction), and kick
after the commit."""
