-- 0003_queue_watchers: who will look at a queue soon (a draining worker, or a kick on its way), so producers kick only when nobody will.
CREATE TABLE queue_watchers (
  queue    text        NOT NULL,
  watcher  text        NOT NULL,  -- a worker's id, or 'kick' for a kick sent and not yet taken up
  until    timestamptz NOT NULL,  -- past this instant the watcher no longer counts
  PRIMARY KEY (queue, watcher)
);
