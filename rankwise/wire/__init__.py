"""The shapes that travel between the server and its clients: reply and request structs."""
