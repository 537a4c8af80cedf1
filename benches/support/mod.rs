//! Shared by the benchmarks (a subdirectory, so cargo does not take it for a bench target).
#![allow(dead_code)]

/// The allocator `cairn serve` runs with (src/main.rs), so a benchmark measures the CPU and
/// memory of the process it stands for: with glibc's malloc the orchestration bench's own CPU
/// per step was 32-44% higher (measured as in docs/benchmarks.md, "CPU per step").
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

pub mod fakes;
pub mod stack;
pub mod wire;
