//! The sorted table a probed collection's [`Store`](super::store::Store)
//! keeps its resources in, as small as a resource can be kept: 16 bytes
//! an entry, its key's bytes and 4 bytes per condition type counted for
//! the metrics ([`Row`]). The keys (`namespace/name`) lie end to end
//! in blocks of 64 KiB ([`Blocks`]), each followed by its row's transition
//! times, each entry pointing at its own; the entry holds the row's
//! statuses in 2 bits a type; the marks of the usual
//! resource (it neither blocks nor needs attention) are nothing, and the
//! few distinct marks many resources share (the same terms decided them)
//! are one shared copy each. At 50,000 resources that is ~2 MB, where a
//! boxed key and three boxed strings each would be ~5 MB.

use std::sync::Arc;

/// What the expressions say about one resource: the terms that decided
/// it, when it blocks an upgrade or needs attention; or why it could not
/// be read (a field of an unexpected type: it is neither, and is reported).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Marks {
    pub blocking: Option<Box<str>>,
    pub important: Option<Box<str>>,
    pub unreadable: Option<Box<str>>,
}

/// The most condition types a row holds (2 bits of status each in a
/// `u16`): the most `--condition-metrics-max-types` allows, and its default.
pub(crate) const ROW_TYPES: usize = 8;

/// One resource's conditions of the counted types (by the store's index of
/// each type): a status in 2 bits a type ([`ABSENT`], [`TRUE`], [`FALSE`],
/// [`UNKNOWN`]), its `lastTransitionTime` in Unix seconds (0: none), and
/// whether it carries a condition of a type not counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Row {
    pub statuses: u16,
    pub untracked: bool,
    pub times: [u32; ROW_TYPES],
}

pub(crate) const ABSENT: u16 = 0;
pub(crate) const TRUE: u16 = 1;
pub(crate) const FALSE: u16 = 2;
pub(crate) const UNKNOWN: u16 = 3;

impl Row {
    /// The status of the type at `index`.
    pub(crate) fn status(&self, index: usize) -> u16 {
        (self.statuses >> (2 * index)) & 3
    }

    pub(crate) fn set(&mut self, index: usize, status: u16, time: u32) {
        self.statuses = (self.statuses & !(3 << (2 * index))) | (status << (2 * index));
        self.times[index] = time;
    }
}

/// The bit of [`Entry::len`] saying the resource carries an untracked type
/// (keys are at most ~317 bytes).
const UNTRACKED: u16 = 1 << 15;

/// Where one resource's key lies in [`Table::names`] (its row's times
/// after it), its length and [`UNTRACKED`] bit, its row's statuses, and
/// its marks (none: the default marks).
#[derive(Clone, Debug)]
struct Entry {
    at: u32,
    len: u16,
    statuses: u16,
    marks: Option<Arc<Marks>>,
}

impl Entry {
    fn key_len(&self) -> usize {
        usize::from(self.len & !UNTRACKED)
    }
}

/// Resources by key, sorted; see the module doc. Pure.
#[derive(Clone, Debug, Default)]
pub(super) struct Table {
    /// Every key, each followed by its row's `stride` times (`u32`, little
    /// endian), end to end (with those of removed entries until the next
    /// compaction). At most [`super::MAX_RESOURCES`] keys of at most
    /// ~317 bytes and 32 bytes of times, and as many unused: far within a
    /// `u32`.
    names: Blocks,
    /// Times per entry: the condition types counted so far.
    stride: usize,
    entries: Vec<Entry>,
    /// Bytes of `names` no entry points at.
    unused: usize,
    /// Entries were pushed out of order ([`Table::push`]): sorted at the
    /// next [`Table::settle`].
    unsorted: bool,
    /// The distinct marks shared: at most [`MAX_SHARED`]; marks met past
    /// that (a reason per unreadable resource) are each their own.
    shared: Vec<Arc<Marks>>,
}

/// How many distinct marks are shared; a search among them is a short
/// scan.
const MAX_SHARED: usize = 64;

/// Unused key bytes are dropped once they are over this and over half of
/// [`Table::names`].
const COMPACT_AFTER: usize = 64 * 1024;

/// The size of a block of [`Blocks`]: far more than a key and its row
/// (at most 32,767 + 32 bytes; ~350 for a Kubernetes name), so a block's
/// unused tail is a small part of it, and few enough bytes that the last
/// block's unused part is nothing beside 50,000 resources.
const BLOCK: usize = 64 * 1024;

/// Bytes appended in blocks of [`BLOCK`] bytes, each allocated whole when
/// the one before is full and never moved, a record (a key and its row)
/// always within one block, at `block * BLOCK + offset`.
///
/// Why not one buffer: a list fills the table from nothing to all its
/// resources, and a buffer that doubles as it grows leaves each outgrown
/// copy in the allocator's heap, which dlmalloc keeps (it gives back only
/// a top over 2 MiB free): 1.2 MiB of steady RSS at 50,000 Foos with
/// their rows (docs/footprint.md, "Probes at scale"). Blocks are never
/// outgrown.
#[derive(Clone, Debug, Default)]
struct Blocks {
    blocks: Vec<Vec<u8>>,
    /// Bytes written, in all blocks.
    len: usize,
}

impl Blocks {
    fn len(&self) -> usize {
        self.len
    }

    fn get(&self, at: u32, len: usize) -> &[u8] {
        let (block, from) = (at as usize / BLOCK, at as usize % BLOCK);
        &self.blocks[block][from..from + len]
    }

    fn get_mut(&mut self, at: u32, len: usize) -> &mut [u8] {
        let (block, from) = (at as usize / BLOCK, at as usize % BLOCK);
        &mut self.blocks[block][from..from + len]
    }

    /// Appends `bytes` and `zeros` zero bytes as one record; where it
    /// starts.
    fn push(&mut self, bytes: &[u8], zeros: usize) -> u32 {
        let span = bytes.len() + zeros;
        debug_assert!(span <= BLOCK, "a record fits in a block");
        match self.blocks.last_mut() {
            Some(last) if last.len() + span <= BLOCK => {
                // Only the last block, once shrunk, is short of a whole one.
                if last.capacity() < last.len() + span {
                    last.reserve_exact(BLOCK - last.len());
                }
            }
            _ => self.blocks.push(Vec::with_capacity(BLOCK)),
        }
        let index = self.blocks.len() - 1;
        let block = &mut self.blocks[index];
        let at = index * BLOCK + block.len();
        block.extend_from_slice(bytes);
        block.resize(block.len() + zeros, 0);
        self.len += span;
        at as u32
    }

    /// Gives back the last block's unused part.
    fn shrink_to_fit(&mut self) {
        if let Some(last) = self.blocks.last_mut() {
            last.shrink_to_fit();
        }
        self.blocks.shrink_to_fit();
    }

    /// The bytes the blocks hold room for.
    #[cfg(test)]
    fn capacity(&self) -> usize {
        self.blocks.iter().map(Vec::capacity).sum()
    }

    /// Every block's bytes, end to end.
    #[cfg(test)]
    fn concat(&self) -> Vec<u8> {
        self.blocks.concat()
    }
}

impl Table {
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    fn key_bytes(&self, entry: &Entry) -> &[u8] {
        self.names.get(entry.at, entry.key_len())
    }

    fn key(&self, entry: &Entry) -> &str {
        // Keys are pushed as `&str` and moved whole: always UTF-8.
        std::str::from_utf8(self.key_bytes(entry)).unwrap_or_default()
    }

    /// The bytes an entry takes in [`Table::names`].
    fn span(&self, entry: &Entry) -> usize {
        entry.key_len() + 4 * self.stride
    }

    fn row(&self, entry: &Entry) -> Row {
        let mut row = Row { statuses: entry.statuses, untracked: entry.len & UNTRACKED != 0, ..Row::default() };
        let times = &self.names.get(entry.at, self.span(entry))[entry.key_len()..];
        for (time, bytes) in row.times.iter_mut().zip(times.chunks_exact(4)) {
            *time = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        }
        row
    }

    /// The row of the entry at `at`.
    pub(super) fn row_at(&self, at: usize) -> Row {
        self.row(&self.entries[at])
    }

    /// Every resource's row, with whether it could be read (an unreadable
    /// one's row says nothing).
    pub(super) fn rows(&self) -> impl Iterator<Item = (Row, bool)> {
        self.entries.iter().map(|e| (self.row(e), e.marks.as_ref().is_none_or(|m| m.unreadable.is_none())))
    }

    /// Rows of `stride` times from now on (a new condition type counted):
    /// every entry's row is widened, its new times 0.
    pub(super) fn widen(&mut self, stride: usize) {
        if stride <= self.stride {
            return;
        }
        let mut names = Blocks::default();
        for entry in &mut self.entries {
            let record = self.names.get(entry.at, entry.key_len() + 4 * self.stride);
            entry.at = names.push(record, 4 * (stride - self.stride));
        }
        (self.names, self.unused, self.stride) = (names, 0, stride);
    }

    /// Writes `row` over the entry at `at`'s (same size: no new bytes).
    fn write_row(&mut self, at: usize, row: &Row) {
        let entry = &mut self.entries[at];
        entry.statuses = row.statuses;
        entry.len = (entry.len & !UNTRACKED) | if row.untracked { UNTRACKED } else { 0 };
        let (at, key_len) = (entry.at, entry.key_len());
        let times = &mut self.names.get_mut(at, key_len + 4 * self.stride)[key_len..];
        for (bytes, time) in times.chunks_exact_mut(4).zip(&row.times) {
            bytes.copy_from_slice(&time.to_le_bytes());
        }
    }

    /// Where `key` is, or where it would be inserted (in a settled table:
    /// see [`Table::push`]).
    pub(super) fn find(&self, key: &str) -> Result<usize, usize> {
        debug_assert!(!self.unsorted, "a pushed table is settled before it is searched");
        // A list arrives sorted: appending is the common case.
        match self.entries.last() {
            Some(last) if self.key_bytes(last) >= key.as_bytes() => {
                self.entries.binary_search_by(|e| self.key_bytes(e).cmp(key.as_bytes()))
            }
            _ => Err(self.entries.len()),
        }
    }

    /// The resources in key order.
    #[cfg(test)]
    fn iter(&self) -> impl Iterator<Item = (&str, &Marks)> {
        static NONE: Marks = Marks { blocking: None, important: None, unreadable: None };
        self.entries.iter().map(|e| (self.key(e), e.marks.as_deref().unwrap_or(&NONE)))
    }

    /// The resources whose marks are not the default, in key order: what
    /// a tally names, without a step over the others' keys.
    pub(super) fn marked(&self) -> impl Iterator<Item = (&str, &Marks)> {
        self.entries.iter().filter_map(|e| e.marks.as_deref().map(|m| (self.key(e), m)))
    }

    /// How many resources have the default marks (read, neither blocking
    /// nor needing attention).
    pub(super) fn unmarked(&self) -> usize {
        self.entries.iter().filter(|e| e.marks.is_none()).count()
    }

    /// Inserts `key` at `at` (from [`Table::find`]).
    pub(super) fn insert(&mut self, at: usize, key: &str, marks: Marks, row: &Row) {
        let len = key.len().min(usize::from(!UNTRACKED)) as u16;
        let marks = self.share(marks);
        let written = self.names.push(&key.as_bytes()[..usize::from(len)], 4 * self.stride);
        self.entries.insert(at, Entry { at: written, len, statuses: 0, marks });
        self.write_row(at, row);
    }

    /// Appends `key` as a list brings it: in any order (the API server's
    /// watch cache answers in its map's order), sorted once by
    /// [`Table::settle`] rather than each moving the entries after it.
    /// A key pushed twice keeps its last marks.
    pub(super) fn push(&mut self, key: &str, marks: Marks, row: &Row) {
        match self.entries.last() {
            Some(last) if self.key(last) == key => {
                self.replace(self.entries.len() - 1, marks, row);
                return;
            }
            Some(last) if self.key(last) > key => self.unsorted = true,
            _ => {}
        }
        self.insert(self.entries.len(), key, marks, row);
    }

    /// Sorts what [`Table::push`] appended out of order; of a key pushed
    /// more than once, the last stays.
    pub(super) fn settle(&mut self) {
        if !std::mem::take(&mut self.unsorted) {
            return;
        }
        let (names, times) = (&self.names, 4 * self.stride);
        let key = |e: &Entry| names.get(e.at, e.key_len());
        // Reversed, then a stable sort: of equal keys the last pushed
        // comes first, and is the one `dedup` keeps.
        self.entries.reverse();
        self.entries.sort_by(|a, b| key(a).cmp(key(b)));
        let mut dropped = 0;
        self.entries.dedup_by(|later, kept| {
            let same = key(later) == key(kept);
            dropped += if same { later.key_len() + times } else { 0 };
            same
        });
        self.unused += dropped;
    }

    /// Sets the marks and row of the entry at `at`; the marks it had.
    pub(super) fn replace(&mut self, at: usize, marks: Marks, row: &Row) -> Marks {
        self.write_row(at, row);
        let marks = self.share(marks);
        owned(std::mem::replace(&mut self.entries[at].marks, marks))
    }

    /// Removes the entry at `at`; its marks.
    pub(super) fn remove(&mut self, at: usize) -> Marks {
        let entry = self.entries.remove(at);
        self.unused += self.span(&entry);
        if self.unused > COMPACT_AFTER && self.unused > self.names.len() / 2 {
            self.compact();
        }
        owned(entry.marks)
    }

    /// Gives back the memory a list's growth left unused.
    pub(super) fn shrink_to_fit(&mut self) {
        self.settle();
        self.compact();
        self.entries.shrink_to_fit();
        self.names.shrink_to_fit();
    }

    /// Rewrites `names` with only the keys (and rows) in use.
    fn compact(&mut self) {
        if self.unused == 0 {
            return;
        }
        let mut names = Blocks::default();
        let times = 4 * self.stride;
        for entry in &mut self.entries {
            entry.at = names.push(self.names.get(entry.at, entry.key_len() + times), 0);
        }
        (self.names, self.unused) = (names, 0);
    }

    /// `marks` as an entry keeps them: nothing for the default, else the
    /// shared copy of equal marks.
    fn share(&mut self, marks: Marks) -> Option<Arc<Marks>> {
        if marks == Marks::default() {
            return None;
        }
        if let Some(same) = self.shared.iter().find(|s| ***s == marks) {
            return Some(Arc::clone(same));
        }
        if self.shared.len() == MAX_SHARED {
            // Forget the marks no entry uses any more.
            self.shared.retain(|s| Arc::strong_count(s) > 1);
        }
        let marks = Arc::new(marks);
        if self.shared.len() < MAX_SHARED {
            self.shared.push(Arc::clone(&marks));
        }
        Some(marks)
    }
}

fn owned(marks: Option<Arc<Marks>>) -> Marks {
    marks.map(Arc::unwrap_or_clone).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocking(terms: &str) -> Marks {
        Marks { blocking: Some(terms.into()), ..Marks::default() }
    }

    fn keys(table: &Table) -> Vec<&str> {
        table.iter().map(|(k, _)| k).collect()
    }

    /// The steady RSS with probes over 50,000 Foos (docs/footprint.md,
    /// "Probes at scale"; docs/probes-and-metrics.md, the cost of the
    /// metrics per condition) counts 16 bytes an entry: the row's statuses
    /// ride in the entry's padding.
    #[test]
    fn an_entry_is_sixteen_bytes() {
        assert_eq!(std::mem::size_of::<Entry>(), 16);
    }

    /// The same figure counts a key and its row's times once, with no
    /// outgrown copy left behind by a list: a block, once allocated, is
    /// never moved (a buffer that doubled cost 1.2 MiB more at 50,000
    /// Foos), and a settled table holds what its resources need, but for
    /// each block's tail shorter than a record.
    #[test]
    fn a_listed_table_never_copies_its_keys_and_keeps_no_room_to_grow() {
        let (mut table, n) = (Table::default(), 50_000);
        table.widen(3);
        let mut placed = Vec::new();
        for i in 0..n {
            // The watch cache's order: not sorted.
            let key = format!("foos-50000/foo-{:05}", (i * 7_919) % n);
            let mut row = Row::default();
            row.set(2, TRUE, i as u32);
            table.push(&key, Marks::default(), &row);
            if table.names.blocks.len() > placed.len() {
                placed.push(table.names.blocks[placed.len()].as_ptr());
            }
        }
        let now: Vec<*const u8> = table.names.blocks.iter().map(|b| b.as_ptr()).collect();
        assert_eq!(now, placed, "no block moved as the table grew");
        table.shrink_to_fit();
        let record = "foos-50000/foo-00000".len() + 3 * 4;
        assert_eq!(table.names.len(), n * record);
        assert!(
            table.names.capacity() - table.names.len() < table.names.blocks.len() * record,
            "{} bytes held for {} written",
            table.names.capacity(),
            table.names.len()
        );
        assert_eq!(table.entries.capacity(), n, "no room to grow once listed");
        assert_eq!(table.rows().filter(|(r, _)| r.times[2] == 7 && r.status(2) == TRUE).count(), 1);
        assert_eq!(table.find("foos-50000/foo-31415"), Ok(31_415));
    }

    #[test]
    fn keys_stay_sorted_and_readable_through_inserts_and_removals() {
        let mut table = Table::default();
        for key in ["ns/b", "ns/d", "ns/a", "ns/c"] {
            let at = table.find(key).unwrap_err();
            table.insert(at, key, Marks::default(), &Row::default());
        }
        assert_eq!(keys(&table), ["ns/a", "ns/b", "ns/c", "ns/d"]);
        assert_eq!(table.find("ns/c"), Ok(2));
        assert_eq!(table.remove(1), Marks::default());
        assert_eq!(keys(&table), ["ns/a", "ns/c", "ns/d"]);
        assert_eq!(table.unused, 4, "the removed key's bytes wait for a compaction");
        table.shrink_to_fit();
        assert_eq!((table.unused, table.names.concat()), (0, b"ns/ans/cns/d".to_vec()));
        assert_eq!(keys(&table), ["ns/a", "ns/c", "ns/d"]);
    }

    #[test]
    fn keys_pushed_in_any_order_are_sorted_once_and_the_last_of_a_key_stays() {
        let mut table = Table::default();
        table.push("ns/c", blocking("first"), &Row::default());
        table.push("ns/a", Marks::default(), &Row::default());
        table.push("ns/c", blocking("second"), &Row::default());
        table.push("ns/b", Marks::default(), &Row::default());
        table.push("ns/b", blocking("again"), &Row::default());
        assert!(table.unsorted);
        table.settle();
        assert_eq!(keys(&table), ["ns/a", "ns/b", "ns/c"]);
        let marks: Vec<Marks> = table.iter().map(|(_, m)| m.clone()).collect();
        assert_eq!(marks, [Marks::default(), blocking("again"), blocking("second")]);
        assert_eq!(table.find("ns/b"), Ok(1));
        table.shrink_to_fit();
        assert_eq!(table.names.concat(), b"ns/ans/bns/c", "the dropped duplicate's bytes are gone");
    }

    #[test]
    fn a_large_list_in_random_order_settles_sorted() {
        let mut table = Table::default();
        // A fixed permutation of 0..50_000 (multiplication by a unit mod n).
        let n = 50_000u64;
        for i in 0..n {
            let k = (i * 7_919) % n;
            table.push(&format!("ns/r{k:06}"), Marks::default(), &Row::default());
        }
        table.settle();
        assert_eq!(table.len(), n as usize);
        let all: Vec<&str> = keys(&table);
        assert!(all.windows(2).all(|w| w[0] < w[1]), "sorted, no duplicates");
        assert_eq!(table.find("ns/r031415"), Ok(31_415));
    }

    #[test]
    fn unused_key_bytes_are_dropped_once_they_are_most_of_the_names() {
        let mut table = Table::default();
        let keys: Vec<String> = (0..20_000).map(|i| format!("namespace/resource-{i:06}")).collect();
        for key in &keys {
            table.insert(table.len(), key, Marks::default(), &Row::default());
        }
        let full = table.names.len();
        for _ in 0..15_000 {
            table.remove(0);
            assert!(table.unused <= full / 2 + COMPACT_AFTER, "{}", table.unused);
        }
        assert!(table.names.len() < full / 2, "compacted: {} of {full}", table.names.len());
        assert_eq!(table.iter().next().map(|(k, _)| k), Some(keys[15_000].as_str()));
        assert_eq!(table.find(&keys[19_999]), Ok(4_999));
    }

    #[test]
    fn equal_marks_are_kept_once_and_the_usual_resource_keeps_none() {
        let mut table = Table::default();
        for i in 0..1_000 {
            let marks = if i % 2 == 0 { blocking("Migrating") } else { Marks::default() };
            table.insert(table.len(), &format!("ns/r{i:04}"), marks, &Row::default());
        }
        assert_eq!(table.shared.len(), 1, "one copy of the shared marks");
        assert_eq!((table.unmarked(), table.marked().count()), (500, 500));
        assert_eq!(table.marked().next().map(|(k, _)| k), Some("ns/r0000"));
        assert_eq!(Arc::strong_count(&table.shared[0]), 501);
        assert_eq!(table.entries.iter().filter(|e| e.marks.is_none()).count(), 500);
        assert_eq!(table.replace(0, Marks::default(), &Row::default()), blocking("Migrating"));
        assert_eq!(table.replace(1, blocking("Migrating"), &Row::default()), Marks::default());
        assert_eq!(table.iter().nth(1).map(|(_, m)| m.clone()), Some(blocking("Migrating")));
    }

    #[test]
    fn distinct_marks_past_the_bound_are_kept_each_their_own() {
        let mut table = Table::default();
        for i in 0..200 {
            table.insert(table.len(), &format!("ns/r{i:03}"), blocking(&format!("reason {i}")), &Row::default());
        }
        assert_eq!(table.shared.len(), MAX_SHARED);
        let marks: Vec<Marks> = table.iter().map(|(_, m)| m.clone()).collect();
        assert_eq!(marks[150], blocking("reason 150"), "still its own");
        // Once entries stop using the shared ones, they make room.
        for at in 0..MAX_SHARED {
            table.replace(at, Marks::default(), &Row::default());
        }
        table.insert(table.len(), "ns/z", blocking("new"), &Row::default());
        assert!(table.shared.iter().any(|s| **s == blocking("new")));
    }

    #[test]
    fn rows_travel_with_their_keys_through_sorting_widening_and_compaction() {
        let mut table = Table::default();
        let row = |status: u16, time: u32| {
            let mut row = Row::default();
            row.set(0, status, time);
            row
        };
        table.widen(1);
        for (key, status, time) in [("ns/c", TRUE, 30), ("ns/a", FALSE, 10), ("ns/b", UNKNOWN, 20)] {
            table.push(key, Marks::default(), &row(status, time));
        }
        table.settle();
        table.widen(2);
        let at = table.find("ns/b").unwrap();
        let mut wide = row(UNKNOWN, 20);
        wide.set(1, TRUE, 99);
        wide.untracked = true;
        table.replace(at, Marks::default(), &wide);
        assert_eq!(table.remove(0), Marks::default());
        table.shrink_to_fit();
        let rows: Vec<Row> = table.rows().map(|(r, _)| r).collect();
        assert_eq!(keys(&table), ["ns/b", "ns/c"]);
        assert_eq!(rows, [wide, row(TRUE, 30)]);
        assert_eq!(table.names.len(), 2 * (4 + 8), "each key and its two times");
    }
}
