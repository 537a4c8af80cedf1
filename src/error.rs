//! API errors as `application/problem+json` (built in the HTTP foundation work).
