-- channel_listen: Listen on a channel for this session (the name is spliced in as a quoted identifier, pgkick.store.listen: LISTEN takes no parameter).
LISTEN {channel};
