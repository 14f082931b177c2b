//! `raft::Storage` for one group over the node's shared raft-engine
//! instance. Entries live in raft-engine; the hard state, the conf state
//! and the latest snapshot's metadata are raft-engine key-values of the
//! group; the snapshot image itself is a file (see `snapfile`), kept in
//! memory once loaded so a leader can hand it to a lagging follower.
//!
//! The node loop hands raft-rs a Ready's entries before they reach
//! raft-engine (the write, and its fsync, run off the loop while the loop
//! keeps stepping), so the storage keeps those entries in memory, tagged
//! with the log write that carries them, until that write completes; reads
//! see them over what raft-engine holds. They stay until applied too (an
//! entry cache, bounded): applying reads them back, and raft-engine would
//! read, decompress and decode them from its files.

use bytes::Bytes;
use raft::eraftpb::{ConfState, Entry, HardState, Snapshot, SnapshotMetadata};
use raft::{GetEntriesContext, RaftState, StorageError};
use raft_engine::{Engine, LogBatch, MessageExt};
use std::collections::VecDeque;
use std::sync::Arc;

/// Tells raft-engine how to find an entry's index.
#[derive(Clone)]
pub struct EntryExt;

impl MessageExt for EntryExt {
    type Entry = Entry;
    fn index(e: &Entry) -> u64 {
        e.index
    }
}

pub const KEY_HARD_STATE: &[u8] = b"hs";
pub const KEY_CONF_STATE: &[u8] = b"cs";
pub const KEY_SNAPSHOT: &[u8] = b"snap";

pub struct GroupStorage {
    engine: Arc<Engine>,
    group: u64,
    hard_state: HardState,
    conf_state: ConfState,
    /// Metadata of the latest snapshot (index 0 = none).
    snap_meta: SnapshotMetadata,
    /// The latest snapshot's image (empty when none was taken).
    snap_data: Bytes,
    /// The newest entries, contiguous by index, each with the number of
    /// the log write that carries it: every entry not yet written to
    /// raft-engine, and written ones not yet applied (up to
    /// [`CACHE_ENTRIES`]). They shadow raft-engine's entries from their
    /// first index on (an append that overwrites a conflicting tail lands
    /// here first).
    recent: VecDeque<(u64, Entry)>,
    /// Log writes up to this number have completed.
    written_write: u64,
    /// Entries up to this index were applied.
    applied: u64,
}

/// Written entries kept in memory while they wait to be applied.
const CACHE_ENTRIES: usize = 4096;

fn store_err(e: impl std::fmt::Display) -> raft::Error {
    raft::Error::Store(StorageError::Other(e.to_string().into()))
}

impl GroupStorage {
    /// Opens a group's storage from what raft-engine recovered; a group that
    /// has never run starts with `voters` as its configuration.
    pub fn open(engine: Arc<Engine>, group: u64, voters: &[u64]) -> Result<GroupStorage, String> {
        let get_err =
            |what: &str, e: raft_engine::Error| format!("group {group}: reading {what}: {e}");
        let hard_state: Option<HardState> = engine
            .get_message(group, KEY_HARD_STATE)
            .map_err(|e| get_err("hard state", e))?;
        let conf_state: Option<ConfState> = engine
            .get_message(group, KEY_CONF_STATE)
            .map_err(|e| get_err("conf state", e))?;
        let snap_meta: Option<SnapshotMetadata> = engine
            .get_message(group, KEY_SNAPSHOT)
            .map_err(|e| get_err("snapshot metadata", e))?;
        let conf_state = conf_state.unwrap_or_else(|| ConfState {
            voters: voters.to_vec(),
            ..Default::default()
        });
        Ok(GroupStorage {
            engine,
            group,
            hard_state: hard_state.unwrap_or_default(),
            conf_state,
            snap_meta: snap_meta.unwrap_or_default(),
            snap_data: Bytes::new(),
            recent: VecDeque::new(),
            written_write: 0,
            applied: 0,
        })
    }

    /// Whether the group had any persisted state before this start.
    pub fn is_fresh(&self) -> bool {
        self.hard_state.term == 0 && self.snap_meta.index == 0
    }

    pub fn snapshot_index(&self) -> u64 {
        self.snap_meta.index
    }

    pub fn snapshot_meta(&self) -> &SnapshotMetadata {
        &self.snap_meta
    }

    pub fn conf_state(&self) -> &ConfState {
        &self.conf_state
    }

    pub fn commit_index(&self) -> u64 {
        self.hard_state.commit
    }

    /// Records a new hard state in `batch` and in memory.
    pub fn set_hard_state(&mut self, hs: &HardState, batch: &mut LogBatch) -> Result<(), String> {
        batch
            .put_message(self.group, KEY_HARD_STATE.to_vec(), hs)
            .map_err(|e| e.to_string())?;
        self.hard_state = hs.clone();
        Ok(())
    }

    /// Appends (or overwrites from their first index) entries in `batch`,
    /// the batch of log write number `write`; until [`Self::written`] is
    /// told that write completed, reads find them in memory.
    pub fn append(
        &mut self,
        entries: &[Entry],
        batch: &mut LogBatch,
        write: u64,
    ) -> Result<(), String> {
        let Some(first) = entries.first().map(|e| e.index) else {
            return Ok(());
        };
        batch
            .add_entries::<EntryExt>(self.group, entries)
            .map_err(|e| e.to_string())?;
        while self.recent.back().is_some_and(|(_, e)| e.index >= first) {
            self.recent.pop_back();
        }
        self.recent
            .extend(entries.iter().map(|e| (write, e.clone())));
        Ok(())
    }

    /// Log write number `write` (and every earlier one) reached
    /// raft-engine: its entries are read from there once applied.
    pub fn written(&mut self, write: u64) {
        self.written_write = self.written_write.max(write);
        self.trim();
    }

    /// Entries up to `index` were applied: the written ones leave memory.
    pub fn applied(&mut self, index: u64) {
        self.applied = self.applied.max(index);
        self.trim();
    }

    fn trim(&mut self) {
        while let Some((w, e)) = self.recent.front() {
            let written = *w <= self.written_write;
            if !written || (e.index > self.applied && self.recent.len() <= CACHE_ENTRIES) {
                break;
            }
            self.recent.pop_front();
        }
    }

    /// The first index held in memory, if any.
    fn recent_first(&self) -> Option<u64> {
        self.recent.front().map(|(_, e)| e.index)
    }

    /// The in-memory entry at `idx` (None below or past the held range).
    fn recent_at(&self, idx: u64) -> Option<&Entry> {
        let first = self.recent_first()?;
        let k = usize::try_from(idx.checked_sub(first)?).ok()?;
        self.recent.get(k).map(|(_, e)| e)
    }

    /// Makes `meta` + `data` the group's snapshot (one just taken locally or
    /// one received from the leader), recording the metadata and dropping
    /// the log up to it in `batch`. A received snapshot replaces the whole
    /// log: entries past it may come from a stale term. The image must
    /// already be on disk.
    pub fn set_snapshot(
        &mut self,
        meta: SnapshotMetadata,
        data: Bytes,
        received: bool,
        batch: &mut LogBatch,
    ) -> Result<(), String> {
        if received {
            // The caller writes this batch before raft-rs reads again.
            self.recent.clear();
            batch.add_command(self.group, raft_engine::Command::Clean);
        } else {
            batch.add_command(
                self.group,
                raft_engine::Command::Compact {
                    index: meta.index + 1,
                },
            );
        }
        batch
            .put_message(self.group, KEY_SNAPSHOT.to_vec(), &meta)
            .map_err(|e| e.to_string())?;
        if let Some(cs) = meta.conf_state.as_ref() {
            self.conf_state = cs.clone();
        }
        batch
            .put_message(self.group, KEY_CONF_STATE.to_vec(), &self.conf_state)
            .map_err(|e| e.to_string())?;
        if self.hard_state.commit < meta.index {
            self.hard_state.commit = meta.index;
            self.hard_state.term = self.hard_state.term.max(meta.term);
        }
        batch
            .put_message(self.group, KEY_HARD_STATE.to_vec(), &self.hard_state)
            .map_err(|e| e.to_string())?;
        self.snap_meta = meta;
        self.snap_data = data;
        Ok(())
    }

    /// Loads the image of the persisted snapshot (at start).
    pub fn load_snapshot_data(&mut self, data: Bytes) {
        self.snap_data = data;
    }

    /// Records the conf state of a fresh group so a restart sees it.
    pub fn persist_conf_state(&self, batch: &mut LogBatch) -> Result<(), String> {
        batch
            .put_message(self.group, KEY_CONF_STATE.to_vec(), &self.conf_state)
            .map_err(|e| e.to_string())
    }

    fn engine_first(&self) -> Option<u64> {
        self.engine.first_index(self.group)
    }

    fn engine_last(&self) -> Option<u64> {
        self.engine.last_index(self.group)
    }
}

impl GroupStorage {
    /// Reads every entry after the snapshot once, so that a record damaged
    /// in the middle of the log (its checksum fails only when read) stops
    /// the node at start with a clear message instead of failing inside
    /// raft-rs when the entry is replayed. Reads in bounded chunks.
    pub fn verify_entries(&self) -> Result<(), String> {
        const CHUNK: u64 = 1024;
        let last = raft::Storage::last_index(self).map_err(|e| e.to_string())?;
        let mut low = self
            .snapshot_index()
            .max(raft::Storage::first_index(self).map_err(|e| e.to_string())?);
        if low == 0 {
            low = 1;
        }
        let mut buf = Vec::new();
        while low <= last {
            let high = (low + CHUNK).min(last + 1);
            buf.clear();
            self.engine
                .fetch_entries_to::<EntryExt>(self.group, low, high, None, &mut buf)
                .map_err(|e| format!("entries {low}..{high}: {e}"))?;
            low = high;
        }
        Ok(())
    }
}

impl raft::Storage for GroupStorage {
    fn initial_state(&self) -> raft::Result<RaftState> {
        Ok(RaftState {
            hard_state: self.hard_state.clone(),
            conf_state: self.conf_state.clone(),
        })
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        _context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        let first = self.first_index()?;
        if low < first {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        let last = self.last_index()?;
        if high > last + 1 {
            return Err(store_err(format!(
                "entries [{low}, {high}) out of bound, last index {last}"
            )));
        }
        let mut out = Vec::with_capacity((high - low) as usize);
        let max_size = max_size.into();
        let split = self.recent_first().map_or(high, |u| u.clamp(low, high));
        if low < split {
            let max = max_size.map(|m| m as usize);
            self.engine
                .fetch_entries_to::<EntryExt>(self.group, low, split, max, &mut out)
                .map_err(store_err)?;
        }
        if split < high && out.len() as u64 == split - low {
            out.extend((split..high).filter_map(|i| self.recent_at(i).cloned()));
            raft::util::limit_size(&mut out, max_size);
        }
        // raft-rs expects at least one entry when any is asked for.
        if out.is_empty() && low < high {
            return Err(raft::Error::Store(StorageError::Unavailable));
        }
        Ok(out)
    }

    fn term(&self, idx: u64) -> raft::Result<u64> {
        if idx == self.snap_meta.index {
            return Ok(self.snap_meta.term);
        }
        let first = self.first_index()?;
        if idx < first {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        if idx > self.last_index()? {
            return Err(raft::Error::Store(StorageError::Unavailable));
        }
        if self.recent_first().is_some_and(|u| idx >= u) {
            return match self.recent_at(idx) {
                Some(e) => Ok(e.term),
                None => Err(raft::Error::Store(StorageError::Unavailable)),
            };
        }
        match self.engine.get_entry::<EntryExt>(self.group, idx) {
            Ok(Some(e)) => Ok(e.term),
            Ok(None) => Err(raft::Error::Store(StorageError::Unavailable)),
            Err(e) => Err(store_err(e)),
        }
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(match self.engine_first() {
            Some(i) => i.max(self.snap_meta.index + 1),
            None => self.snap_meta.index + 1,
        })
    }

    fn last_index(&self) -> raft::Result<u64> {
        if let Some((_, e)) = self.recent.back() {
            return Ok(e.index.max(self.snap_meta.index));
        }
        Ok(match self.engine_last() {
            Some(i) => i.max(self.snap_meta.index),
            None => self.snap_meta.index,
        })
    }

    fn snapshot(&self, _request_index: u64, _to: u64) -> raft::Result<Snapshot> {
        if self.snap_meta.index == 0 {
            return Err(raft::Error::Store(
                StorageError::SnapshotTemporarilyUnavailable,
            ));
        }
        let mut s = Snapshot::default();
        s.set_data(self.snap_data.clone());
        s.set_metadata(self.snap_meta.clone());
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use raft::Storage;

    fn entry(index: u64, term: u64) -> Entry {
        Entry {
            index,
            term,
            data: Bytes::from(format!("{index}/{term}")),
            ..Default::default()
        }
    }

    fn open(dir: &std::path::Path) -> GroupStorage {
        let cfg = raft_engine::Config {
            dir: dir.to_string_lossy().into_owned(),
            ..Default::default()
        };
        let engine = Arc::new(Engine::open(cfg).unwrap());
        GroupStorage::open(engine, 7, &[1]).unwrap()
    }

    fn terms(s: &GroupStorage, low: u64, high: u64) -> Vec<(u64, u64)> {
        s.entries(low, high, None, GetEntriesContext::empty(false))
            .unwrap()
            .iter()
            .map(|e| (e.index, e.term))
            .collect()
    }

    /// Entries handed to raft-rs before their write completes are read from
    /// memory, an overwrite of a conflicting tail shadows both the engine's
    /// and the older in-memory entries, and an entry both written and
    /// applied is read from raft-engine again, without losing a newer
    /// overwrite.
    #[test]
    fn recent_entries_are_read_from_memory_until_written_and_applied() {
        let dir = std::env::temp_dir().join(format!("kvasir-storage-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut s = open(&dir);
        let engine = s.engine.clone();

        // Write 1: entries 1..=4 of term 1, written to the engine.
        let mut b1 = LogBatch::default();
        let first: Vec<Entry> = (1..=4).map(|i| entry(i, 1)).collect();
        s.append(&first, &mut b1, 1).unwrap();
        assert_eq!(s.last_index().unwrap(), 4);
        assert_eq!(s.term(3).unwrap(), 1);
        engine.write(&mut b1, false).unwrap();
        s.written(1);
        // Written but not applied: still served from memory.
        assert_eq!(s.recent.len(), 4);
        s.applied(2);
        assert_eq!(s.recent.len(), 2);
        s.applied(4);
        assert!(s.recent.is_empty());

        // Write 2 (in flight): 5..=6 of term 1. Write 3 (queued): a new
        // leader overwrites from 4 with term 2.
        let mut b2 = LogBatch::default();
        s.append(&[entry(5, 1), entry(6, 1)], &mut b2, 2).unwrap();
        let mut b3 = LogBatch::default();
        s.append(&[entry(4, 2), entry(5, 2)], &mut b3, 3).unwrap();
        assert_eq!(s.last_index().unwrap(), 5);
        assert_eq!(terms(&s, 2, 6), vec![(2, 1), (3, 1), (4, 2), (5, 2)]);
        assert_eq!(s.term(4).unwrap(), 2);
        assert!(s.term(6).is_err());

        // Write 2 completes: nothing of it is left in memory, the overwrite
        // still shadows the engine's stale 4..=6.
        engine.write(&mut b2, false).unwrap();
        s.written(2);
        assert_eq!(s.last_index().unwrap(), 5);
        assert_eq!(
            terms(&s, 1, 6),
            vec![(1, 1), (2, 1), (3, 1), (4, 2), (5, 2)]
        );

        // Write 3 completes: the engine has the truncated, overwritten log.
        engine.write(&mut b3, false).unwrap();
        s.written(3);
        s.applied(5);
        assert!(s.recent.is_empty());
        assert_eq!(s.last_index().unwrap(), 5);
        assert_eq!(
            terms(&s, 1, 6),
            vec![(1, 1), (2, 1), (3, 1), (4, 2), (5, 2)]
        );

        // A size limit still returns at least one entry, across the split.
        let mut b4 = LogBatch::default();
        s.append(&[entry(6, 2), entry(7, 2)], &mut b4, 4).unwrap();
        let one = s
            .entries(5, 8, Some(1), GetEntriesContext::empty(false))
            .unwrap();
        assert_eq!(one.len(), 1);
        let all = s
            .entries(5, 8, None, GetEntriesContext::empty(false))
            .unwrap();
        assert_eq!(
            all.iter().map(|e| e.index).collect::<Vec<_>>(),
            vec![5, 6, 7]
        );
        drop(s);
        drop(engine);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
