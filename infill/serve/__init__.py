"""``infill serve``: one engine shared by many editors over a websocket (protocol, batcher, server, client)."""
