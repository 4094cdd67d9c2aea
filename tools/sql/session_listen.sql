-- session_listen: Subscribes this session to job notifications (what LISTEN-based peers hold open).
LISTEN pgkick_jobs;
