//! Keyspace notifications: the events a write produced in the store
//! (`kvasir_core::notify`, handed over as `Written::Events`) published as
//! pub/sub messages, as Redis's notifyKeyspaceEvent does:
//! `__keyspace@<db>__:<key>` carries the event name (class K),
//! `__keyevent@<db>__:<event>` the key (class E).
//!
//! In cluster mode only the node that leads the key's shard publishes
//! (`cluster::publish_loop`), as each Redis Cluster master publishes the
//! events of its own keys.

use crate::pubsub::PubSub;
use bytes::{BufMut, Bytes, BytesMut};
use kvasir_core::notify::{Event, KEYEVENT, KEYSPACE};

/// Publishes `events` on the channels `flags` (the setting) enables.
pub fn publish(pubsub: &PubSub, flags: u32, events: &[Event]) {
    for e in events {
        if flags & e.class == 0 {
            continue;
        }
        if flags & KEYSPACE != 0 {
            let mut ch = BytesMut::with_capacity(24 + e.key.len());
            ch.put_slice(format!("__keyspace@{}__:", e.db).as_bytes());
            ch.put_slice(&e.key);
            pubsub.publish(&ch.freeze(), &Bytes::from_static(e.name.as_bytes()));
        }
        if flags & KEYEVENT != 0 {
            let ch = Bytes::from(format!("__keyevent@{}__:{}", e.db, e.name));
            pubsub.publish(&ch, &e.key);
        }
    }
}

/// Publishes what the standalone store buffered (a command run outside
/// `machine::apply`: a session's write, a blocked client served).
pub fn publish_local(server: &crate::listener::Server) {
    let events = {
        let mut local = server.local_store.borrow_mut();
        if local.store().events.is_empty() {
            return;
        }
        local.with_store(|st| st.take_events())
    };
    let flags = server.config.borrow().notify_keyspace_events;
    publish(&server.pubsub.borrow(), flags, &events);
}
