-- channel_unlisten: Stop listening on a channel (the name is spliced in as a quoted identifier, as for channel_listen).
UNLISTEN {channel};
