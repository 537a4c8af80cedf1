//! Token usage of one model call: reported by the server, or estimated and marked so.
//!
//! The ledger charges tokens, so a missing `usage` must not count as free. The estimate
//! (about four characters per token) is deliberately crude and flagged `estimated`, so reports
//! can tell measured spend from guessed spend.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    /// True when the server reported no usage and these figures are an estimate.
    pub estimated: bool,
}

impl Usage {
    pub fn reported(prompt_tokens: u64, completion_tokens: u64, total_tokens: Option<u64>) -> Self {
        Usage {
            prompt_tokens,
            completion_tokens,
            total_tokens: total_tokens.unwrap_or(prompt_tokens + completion_tokens),
            estimated: false,
        }
    }

    /// Both figures together (two answers of one call); estimated if either was.
    pub fn plus(self, other: Usage) -> Usage {
        Usage {
            prompt_tokens: self.prompt_tokens + other.prompt_tokens,
            completion_tokens: self.completion_tokens + other.completion_tokens,
            total_tokens: self.total_tokens + other.total_tokens,
            estimated: self.estimated || other.estimated,
        }
    }

    /// An estimate from the text sent and received: ceil(chars / 4) each.
    pub fn estimate(prompt_chars: usize, completion_chars: usize) -> Self {
        let tokens = |chars: usize| chars.div_ceil(4) as u64;
        let (prompt_tokens, completion_tokens) = (tokens(prompt_chars), tokens(completion_chars));
        Usage {
            prompt_tokens,
            completion_tokens,
            total_tokens: prompt_tokens + completion_tokens,
            estimated: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn total_defaults_to_the_sum_and_estimates_are_marked() {
        assert_eq!(Usage::reported(10, 5, None).total_tokens, 15);
        assert_eq!(Usage::reported(10, 5, Some(16)).total_tokens, 16);
        let estimate = Usage::estimate(9, 4);
        assert_eq!((estimate.prompt_tokens, estimate.completion_tokens), (3, 1));
        assert!(estimate.estimated);
    }
}
