//! Tool registry and HTTP tool client.
