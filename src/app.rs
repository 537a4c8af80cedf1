//! Application state and the router (built in the HTTP foundation work).
