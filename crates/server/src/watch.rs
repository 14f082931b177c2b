//! WATCH: which clients watch which keys, so that a write to a watched key
//! makes the watcher's next EXEC fail.

use crate::clients::ClientInfo;
use bytes::Bytes;
use std::cell::Cell;
use std::collections::HashMap;
use std::rc::Rc;

/// One connection watching one key. `stale`: the key was already expired
/// (but not yet deleted) when WATCH ran, as Redis 7 notes it: its
/// deletion by expiry is then no change, and EXEC does not count it as
/// expired.
struct Watcher {
    client: Rc<ClientInfo>,
    stale: Cell<bool>,
}

#[derive(Default)]
pub struct Watches {
    by_key: HashMap<(usize, Bytes), Vec<Watcher>>,
}

impl Watches {
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    pub fn watch(&mut self, db: usize, key: &Bytes, client: &Rc<ClientInfo>, stale: bool) {
        let list = self.by_key.entry((db, key.clone())).or_default();
        if !list.iter().any(|w| w.client.id == client.id) {
            list.push(Watcher {
                client: client.clone(),
                stale: Cell::new(stale),
            });
        }
    }

    pub fn unwatch(&mut self, db: usize, key: &Bytes, client: u64) {
        let slot = (db, key.clone());
        if let Some(list) = self.by_key.get_mut(&slot) {
            list.retain(|w| w.client.id != client);
            if list.is_empty() {
                self.by_key.remove(&slot);
            }
        }
    }

    /// Whether `client` watches `key` of `db` as a key that was already
    /// expired when it watched it (and has not been deleted since).
    pub fn is_stale(&self, db: usize, key: &Bytes, client: u64) -> bool {
        self.by_key
            .get(&(db, key.clone()))
            .is_some_and(|list| list.iter().any(|w| w.client.id == client && w.stale.get()))
    }

    /// Marks every watcher of these keys dirty.
    pub fn touch(&self, db: usize, keys: &[Bytes]) {
        if self.by_key.is_empty() {
            return;
        }
        for k in keys {
            if let Some(list) = self.by_key.get(&(db, k.clone())) {
                for w in list {
                    w.client.watch_dirty.set(true);
                }
            }
        }
    }

    /// Expiry deleted these keys: their watchers are dirty, except those
    /// that watched a key already expired, for whom nothing changed (Redis
    /// 7's touchWatchedKey); from now on such a key is simply missing.
    pub fn expired(&self, db: usize, keys: &[Bytes]) {
        if self.by_key.is_empty() {
            return;
        }
        for k in keys {
            if let Some(list) = self.by_key.get(&(db, k.clone())) {
                for w in list {
                    if !w.stale.replace(false) {
                        w.client.watch_dirty.set(true);
                    }
                }
            }
        }
    }

    /// SWAPDB, after the swap: the watchers of `db`'s keys, given what the
    /// key was before (`emptied`) and is now (`replaced_with`): None when
    /// absent, else whether it is expired. As Redis's
    /// touchAllWatchedKeysInDb: a key in neither database is no change,
    /// nor is a stale key that stays stale or goes away; a missing key
    /// replaced by an expired one becomes stale.
    pub fn swapped(
        &self,
        db: usize,
        emptied: impl Fn(&[u8]) -> Option<bool>,
        replaced_with: impl Fn(&[u8]) -> Option<bool>,
    ) {
        for ((d, key), list) in &self.by_key {
            if *d != db {
                continue;
            }
            let before = emptied(key);
            let after = replaced_with(key);
            if before.is_none() && after.is_none() {
                continue;
            }
            for w in list {
                if w.stale.get() {
                    match after {
                        None => {
                            w.stale.set(false);
                            continue;
                        }
                        Some(true) => continue,
                        Some(false) => {}
                    }
                } else if before.is_none() && after == Some(true) {
                    w.stale.set(true);
                    continue;
                }
                w.client.watch_dirty.set(true);
            }
        }
    }

    /// Marks every watcher of any key in `db` dirty (FLUSHDB, SWAPDB);
    /// `None` means every database (FLUSHALL).
    pub fn touch_db(&self, db: Option<usize>) {
        for ((d, _), list) in &self.by_key {
            if db.is_none_or(|db| db == *d) {
                for w in list {
                    w.client.watch_dirty.set(true);
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
