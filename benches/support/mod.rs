//! Shared by the benchmarks (a subdirectory, so cargo does not take it for a bench target).
#![allow(dead_code)]

pub mod fakes;
pub mod stack;
pub mod wire;
