//! Engines drive a claimed task through durable steps.
