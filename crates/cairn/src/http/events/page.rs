//! The JSON form of a task's events, for clients that poll instead of streaming: one page
//! after a `seq`, of the kinds `?kinds=` admits. Events the filter skips are read past, so a
//! page is empty only once the stream has nothing more to give.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::READ_BATCH;
use super::filter::KindFilter;
use crate::domain::event::{Event, kinds};
use crate::http::AppState;
use crate::http::error::ApiError;
use crate::http::tasks::find_task;

/// The JSON form, for clients that poll instead of streaming.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct EventPage {
    pub items: Vec<Event>,
    /// Pass as `after` on the next poll: the last `seq` in `items`, or the `after` sent.
    pub next_after: i64,
    /// True once the task's terminal event has been delivered: stop polling.
    pub terminal: bool,
}

pub(super) async fn event_page(
    state: &AppState,
    tenant: &str,
    id: Uuid,
    page: PageRequest,
) -> Result<EventPage, ApiError> {
    // The task is read first: if it is terminal then, its terminal event is already stored.
    let task = find_task(state, tenant, id).await?;
    let PageRequest {
        after,
        limit,
        filter,
    } = page;
    // Read on past events the filter skips, so a page is empty only at the end of the stream.
    let batch_size = if filter.is_all() { limit } else { READ_BATCH };
    let (mut items, mut read_to) = (Vec::new(), after);
    loop {
        let batch = state
            .store
            .list_events(tenant, id, read_to, batch_size)
            .await?;
        let more = batch.len() as i64 == batch_size;
        for event in batch {
            if items.len() as i64 == limit {
                break;
            }
            read_to = event.seq;
            if filter.admits(&event.kind) {
                items.push(event);
            }
        }
        if items.len() as i64 == limit || !more {
            break;
        }
    }
    let next_after = read_to;
    let terminal = items.iter().any(|event| kinds::is_terminal(&event.kind))
        || (task.status.is_terminal() && next_after >= task.last_seq);
    Ok(EventPage {
        items,
        next_after,
        terminal,
    })
}

/// What one JSON page asks for.
pub(super) struct PageRequest {
    pub after: i64,
    pub limit: i64,
    pub filter: KindFilter,
}
