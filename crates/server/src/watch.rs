//! WATCH: which clients watch which keys, so that a write to a watched key
//! makes the watcher's next EXEC fail.

use crate::clients::ClientInfo;
use bytes::Bytes;
use std::collections::HashMap;
use std::rc::Rc;

#[derive(Default)]
pub struct Watches {
    by_key: HashMap<(usize, Bytes), Vec<Rc<ClientInfo>>>,
}

impl Watches {
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    pub fn watch(&mut self, db: usize, key: &Bytes, client: &Rc<ClientInfo>) {
        let list = self.by_key.entry((db, key.clone())).or_default();
        if !list.iter().any(|c| c.id == client.id) {
            list.push(client.clone());
        }
    }

    pub fn unwatch(&mut self, db: usize, key: &Bytes, client: u64) {
        let slot = (db, key.clone());
        if let Some(list) = self.by_key.get_mut(&slot) {
            list.retain(|c| c.id != client);
            if list.is_empty() {
                self.by_key.remove(&slot);
            }
        }
    }

    /// Marks every watcher of these keys dirty.
    pub fn touch(&self, db: usize, keys: &[Bytes]) {
        if self.by_key.is_empty() {
            return;
        }
        for k in keys {
            if let Some(list) = self.by_key.get(&(db, k.clone())) {
                for c in list {
                    c.watch_dirty.set(true);
                }
            }
        }
    }

    /// Marks every watcher of any key in `db` dirty (FLUSHDB, SWAPDB);
    /// `None` means every database (FLUSHALL).
    pub fn touch_db(&self, db: Option<usize>) {
        for ((d, _), list) in &self.by_key {
            if db.is_none_or(|db| db == *d) {
                for c in list {
                    c.watch_dirty.set(true);
                }
            }
        }
    }

    /// The watched keys of `db` (every database for `None`).
    pub fn keys_in(&self, db: Option<usize>) -> Vec<(usize, Bytes)> {
        self.by_key
            .keys()
            .filter(|(d, _)| db.is_none_or(|db| db == *d))
            .cloned()
            .collect()
    }
}
