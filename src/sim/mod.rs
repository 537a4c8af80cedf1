//! Simulated model and tool endpoints.
