//! Recycling: record chunks whose records were all replaced are reused whole by their
//! shard, a solo chunk (one large record) or a shared one (many small records), once no
//! reader can reach them and no crash can bring their old records back
//! (`docs/design.md` §3.1, "Solo chunks and recycling" and "Shared chunks and recycling").

use std::sync::atomic::Ordering;

use super::{RecordChunk, ShardWriter};
#[cfg(doc)]
use super::{SOLO_MIN_LEN, ShardState, Solo};
use crate::error::{Result, StorageError};
use crate::format::CHUNK_HEADER_LEN;
#[cfg(doc)]
use crate::region::Region;

/// A recycled chunk.
#[derive(Clone, Copy, Debug)]
pub(super) struct Recycled {
    off: u64,
    len: u64,
    /// Its sequence number and generation as a chunk of the shard (see [`Solo`]).
    seq: u64,
    born: u64,
    /// The epoch to wait out before reusing it.
    epoch: u64,
    /// Whether it held many records (a [`Fresh`] chunk) rather than one that began right
    /// after its header (a [`Solo`] chunk); see [`ShardWriter::reuse_recycled`].
    shared: bool,
    /// What its reuse waits for (see [`ShardWriter::reuse_recycled`]).
    wait: Wait,
    /// Bytes of its dead records (see [`counted`](Recycled::counted)).
    dead: u64,
}

impl Recycled {
    /// Whether its dead records still count in the shard's `dead_bytes`: while it waits for
    /// a sync (`Dead`, `Zeroed`), so that automatic rebuilds see space that may stay unused
    /// for as long as no sync comes; not while it is reusable at once (`Clean`).
    fn counted(&self) -> bool {
        self.wait != Wait::Clean
    }
}

/// What a recycled chunk waits for before its reuse. Generations are
/// [`Region::sync_generation`] values read behind a `SeqCst` fence; "synced past `g`" means
/// that [`Region::synced_generation`] exceeds `g`: a hard sync that started after that read
/// has completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wait {
    /// Nothing: no hard sync had started between the chunk's start and the death of its last
    /// record, so no sync has promised its records or the records that replaced them.
    Clean,
    /// Its records were replaced after a hard sync started, at generation `g`: some may be
    /// promised, and their replacements not yet. Once synced past `g` the replacements are
    /// on the disk, and the chunk is zeroed.
    Dead(u64),
    /// Zeroed at generation `g`: reused once synced past `g`, when the disk holds the zeros.
    Zeroed(u64),
}

/// Recycled chunks a shard keeps at most; beyond, the oldest goes back to the dead chunks.
const MAX_RECYCLED: usize = 32;

/// A shared record chunk that its shard follows (see [`ShardState::fresh`]).
#[derive(Clone, Copy, Debug)]
pub(super) struct Fresh {
    off: u64,
    end: u64,
    /// Its sequence number and [`Region::sync_generation`] when it was started.
    seq: u64,
    born: u64,
    /// Bytes of records written in it, known once it is no longer the current chunk.
    written: Option<u64>,
    /// Bytes of its records that newer records of their keys replaced. A removed record is
    /// not counted: its `KILLED` mark must stay (see [`ShardWriter::recycle_fresh`]).
    dead: u64,
}

/// Fresh chunks a shard follows at most (the newest): a chunk whose records are rewritten
/// soon dies within a few chunks of its successors; older ones wait for a rebuild.
pub(super) const MAX_FRESH: usize = 8;

impl ShardWriter<'_> {
    /// A recycled chunk of `need` to `2 * want` bytes (a chunk's tail stays empty) whose
    /// grace period has passed and whose [`Wait`] is over, the most recently recycled first
    /// (its pages are the likeliest to be in memory still), for a new chunk (`solo`: of one
    /// record); `None` if there is none. Returns its offset, its length, and whether its body
    /// is zero already.
    ///
    /// A clean solo chunk reused for another solo chunk is used as it is (its old record
    /// began where the new one begins; see [`write_due_header`](Self::write_due_header)),
    /// once its old record's checksum is zeroed ([`void_solo_record`](Self::void_solo_record))
    /// and if no hard sync has started since it was begun, read after that: a sync that
    /// started since may have written the old record to the disk whole, and a cut that kept
    /// the new header and the disk's pages after it would read it as the newest of its key
    /// (the new record may begin with the same bytes). Such a chunk is zeroed and waits as
    /// below. Any other reuse writes records at other places than the old ones, and under
    /// the new header (once a crash of the machine wrote it back, but not every page after it) an
    /// old record that happened to begin just where the new records end would replay as
    /// newer than the record that replaced it, which a sync may have promised by then. So in
    /// a file the chunk's body is zeroed first, and a clean chunk is reused at once only if
    /// no hard sync has started since it was begun (read after the zeros were stored): every
    /// sync that completes later started after the zeros and writes them back too, and until
    /// one completes nothing written since the chunk was begun is promised (an old record
    /// revived then is an unpromised write of its key, newer than every promised one).
    /// Otherwise the chunk waits, zeroed ([`Wait::Zeroed`]), until a sync that started after
    /// the zeros has completed: the disk then holds them, and the chunk is as good as fresh
    /// space. A chunk whose records some sync may have promised ([`Wait::Dead`]) is zeroed
    /// only once the records that replaced them are on the disk.
    pub(super) fn reuse_recycled(
        &mut self,
        need: u64,
        want: u64,
        solo: bool,
    ) -> Result<Option<(u64, u64, bool)>> {
        let region = &self.ctx.region;
        let file = !region.is_anonymous();
        let epochs = &self.ctx.epochs;
        let g = region.sync_generation();
        let synced = region.synced_generation();
        let as_is = |r: &Recycled| !file || (solo && !r.shared && r.wait == Wait::Clean);
        if file {
            // Zero what can be zeroed now, to be reused after the next sync (above): clean
            // shared chunks begun before the latest sync started, and dead chunks whose
            // replacing records are on the disk.
            for i in 0..self.st.recycled.len() {
                let r = self.st.recycled[i];
                let due = match r.wait {
                    Wait::Clean => r.born != g,
                    Wait::Dead(d) => synced > d,
                    Wait::Zeroed(_) => false,
                };
                if due && epochs.is_safe(r.epoch) {
                    let z = self.zero_body(&r)?;
                    self.wait_zeroed(i, z);
                }
            }
        }
        let usable = |r: &Recycled| match r.wait {
            Wait::Clean => as_is(r) || r.born == g,
            Wait::Dead(_) => false,
            Wait::Zeroed(z) => synced > z,
        };
        let fits = |r: &Recycled| {
            r.len >= need && r.len <= 2 * want && usable(r) && epochs.is_safe(r.epoch)
        };
        let Some(i) = self.st.recycled.iter().rposition(fits) else { return Ok(None) };
        let r = self.st.recycled[i];
        if file && !matches!(r.wait, Wait::Zeroed(_)) {
            // A clean chunk: its old records made unreadable, then the generation read.
            let z = if as_is(&r) { self.void_solo_record(&r)? } else { self.zero_body(&r)? };
            if z != r.born {
                // A hard sync started meanwhile: wait for one that started after the zeros.
                let z = if as_is(&r) { self.zero_body(&r)? } else { z };
                self.wait_zeroed(i, z);
                return Ok(None);
            }
        }
        self.st.recycled.remove(i);
        if r.counted() {
            self.st.dead_bytes = self.st.dead_bytes.saturating_sub(r.dead);
        }
        let zeroed = r.wait != Wait::Clean || !as_is(&r);
        Ok(Some((r.off, r.len, zeroed)))
    }

    /// Zeroes the checksum of the one record of the clean solo chunk `r` (past its grace
    /// period and out of every reader's reach), so that the record never reads whole again,
    /// whatever the new record over it leaves of it; returns [`Region::sync_generation`] read
    /// after the zeros. A 4-byte store where [`zero_body`](Self::zero_body) would clear the
    /// whole chunk: the new record overwrites most of it, and the tail it leaves is zeroed
    /// when it is written.
    fn void_solo_record(&self, r: &Recycled) -> Result<u64> {
        // The record began right after the header and was `dead` bytes long (see `recycle`).
        self.zero_then_generation(r, r.off + CHUNK_HEADER_LEN + r.dead - 4, 4)
    }

    /// Zeroes the body of the recycled chunk `r` (past its grace period and out of every
    /// reader's reach); returns [`Region::sync_generation`] read after the zeros.
    fn zero_body(&self, r: &Recycled) -> Result<u64> {
        let body = r.off + CHUNK_HEADER_LEN;
        self.zero_then_generation(r, body, r.off + r.len - body)
    }

    /// Zeroes `off..off + len` inside the recycled chunk `r`, then reads
    /// [`Region::sync_generation`].
    fn zero_then_generation(&self, r: &Recycled, off: u64, len: u64) -> Result<u64> {
        // SAFETY: the range is inside one of this shard's recycled chunks, whose grace period
        // has passed (no reader can reach it); we hold the shard lock (no other writer).
        unsafe { self.ctx.region.zero(off, len) }
            .ok_or(StorageError::Corrupted { offset: r.off, what: "chunk outside the file" })?;
        // SeqCst: the generation is read after the zeros were stored.
        std::sync::atomic::fence(Ordering::SeqCst);
        Ok(self.ctx.region.sync_generation())
    }

    /// Called when the record at `off` (`len` bytes, longer than [`SOLO_MIN_LEN`]) has just
    /// been replaced by a newer record of its key: if it was alone in a solo chunk, the
    /// chunk is recycled: this shard reuses it, whole, for a later chunk that fits, once no
    /// reader can still be reading it (the epoch is taken after the slot was replaced) and
    /// its [`Wait`] is over (see [`reuse_recycled`](Self::reuse_recycled)).
    ///
    /// Why reusing a clean one as it is for the next solo record is safe. No sync has
    /// promised the old record: none started between its chunk's start and its replacement
    /// (the generation was unchanged, read after the new record and its slot were written).
    /// Reuse zeroes the old record's checksum and takes the chunk as it is only if still no
    /// sync has started since the chunk was begun (else it zeroes the chunk and waits, see
    /// [`reuse_recycled`](Self::reuse_recycled)): until a sync completes, nothing written
    /// since then is promised, and every sync that completes later writes the zeroed
    /// checksum, so the old record never reads whole from the disk again. Reuse writes the
    /// new header last ([`write_due_header`](Self::write_due_header)), at the old header's place,
    /// so a chunk never starts inside the old one's extent, which the old header would hide
    /// from the file's walk. Only replacements recycle: a removal marks the record itself,
    /// which must stay to keep older records of the key dead.
    ///
    /// Returns whether the record was a solo chunk's (recycled or not).
    #[cold]
    pub(super) fn recycle(&mut self, off: u64, len: u64) -> bool {
        let Some(chunk) = off.checked_sub(CHUNK_HEADER_LEN) else { return false };
        let Some(s) = self.st.solo.remove(&chunk) else { return false };
        let wait = self.wait_for(s.born);
        let Some(c) = self.st.chunks.remove(&(s.seq, chunk)) else { return true };
        if self.st.chunk == chunk {
            // A clean close records the current chunk in the directory, and a recycled one
            // may be gone by then.
            self.st.chunk = 0;
            self.st.cursor = 0;
            self.st.chunk_end = 0;
        }
        self.push_recycled(c, s.seq, false, wait, len);
        true
    }

    /// What a chunk started at generation `born`, whose last record has just been
    /// replaced, waits for before its reuse (see [`Wait`]).
    fn wait_for(&self, born: u64) -> Wait {
        let region = &self.ctx.region;
        if region.is_anonymous() {
            return Wait::Clean;
        }
        // SeqCst: the generation is read after the replacing records' stores.
        std::sync::atomic::fence(Ordering::SeqCst);
        let g = region.sync_generation();
        if g == born { Wait::Clean } else { Wait::Dead(g) }
    }

    /// Adds the chunk `c` (sequence number `seq`, `dead` bytes of dead records) to the
    /// shard's recycled chunks, to be reused once the epoch taken now has passed and what
    /// `wait` names has happened. A clean one stops counting as dead at once.
    fn push_recycled(&mut self, c: RecordChunk, seq: u64, shared: bool, wait: Wait, dead: u64) {
        let epoch = self.ctx.epochs.retire();
        let (off, len, born) = (c.off, c.len, c.born);
        if wait == Wait::Clean {
            self.st.dead_bytes = self.st.dead_bytes.saturating_sub(dead);
        }
        let r = Recycled { off, len, seq, born, epoch, shared, wait, dead };
        self.st.recycled.push(r);
        if self.st.recycled.len() > MAX_RECYCLED {
            // Sizes that no new chunk asks for any more: back to the dead chunks, for a
            // rebuild to free.
            let r = self.st.recycled.remove(0);
            self.unrecycle(r);
        }
    }

    /// Counts the `len` bytes of the record at `off`, just replaced, as dead in
    /// its chunk if that is a [`Fresh`] one; a fresh chunk that is no longer current and
    /// whose records are now all dead is recycled (see [`recycle_fresh`](Self::recycle_fresh)).
    #[inline]
    pub(super) fn note_dead(&mut self, off: u64, len: u64) {
        if !self.st.fresh.is_empty() {
            self.count_dead(off, len);
        }
    }

    /// [`note_dead`](Self::note_dead) once there are fresh chunks (out of line: it is not
    /// needed to keep the write paths short).
    #[inline(never)]
    fn count_dead(&mut self, off: u64, len: u64) {
        let Some(i) = self.st.fresh.iter().rposition(|f| f.off < off && off < f.end) else {
            return;
        };
        let f = &mut self.st.fresh[i];
        f.dead += len;
        if f.written.is_some_and(|w| f.dead >= w) {
            self.recycle_fresh(i);
        }
    }

    /// Called when a new chunk was started: `prev` is the chunk that was current before it
    /// and where its records end, which are now known if it is a [`Fresh`] one (which may
    /// then be recycled at once); `c` is the new chunk (sequence number `seq`) if it is for
    /// shared records, which this shard then follows.
    pub(super) fn follow_fresh(&mut self, c: Option<RecordChunk>, seq: u64, prev: (u64, u64)) {
        if self.st.copying {
            // A rebuild's copy: its chunks must stay until the commit (see `compact`).
            return;
        }
        let (prev_chunk, prev_cursor) = prev;
        if prev_chunk != 0
            && let Some(i) = self.st.fresh.iter().rposition(|f| f.off == prev_chunk)
        {
            let f = &mut self.st.fresh[i];
            let written = prev_cursor - (prev_chunk + CHUNK_HEADER_LEN);
            f.written = Some(written);
            if f.dead >= written {
                self.recycle_fresh(i);
            }
        }
        let Some(c) = c else { return };
        if self.st.fresh.len() == MAX_FRESH {
            self.st.fresh.remove(0);
        }
        let f = Fresh { off: c.off, end: c.off + c.len, seq, born: c.born, written: None, dead: 0 };
        self.st.fresh.push(f);
    }

    /// Recycles the fresh chunk `fresh[i]`, whose records are all dead and which is no
    /// longer the current chunk: this shard reuses it, whole, for a later chunk once what
    /// its [`Wait`] names has happened (see [`reuse_recycled`](Self::reuse_recycled)).
    ///
    /// Removals and clears need no check (unlike a rebuild's, see [`ShardState::killed`]): a
    /// chunk counts as dead only when each of its records was replaced by a newer record of
    /// its key, and neither a removal's `KILLED` mark (on the key's newest record, which
    /// nothing replaces after it) nor a clear's record ever is.
    #[cold]
    fn recycle_fresh(&mut self, i: usize) {
        let f = self.st.fresh.remove(i);
        let wait = self.wait_for(f.born);
        let Some(c) = self.st.chunks.remove(&(f.seq, f.off)) else { return };
        self.push_recycled(c, f.seq, true, wait, f.dead);
    }

    /// Makes a recycled chunk an ordinary dead chunk of the shard again (on disk it is one).
    pub(super) fn unrecycle(&mut self, r: Recycled) {
        self.st.chunks.insert((r.seq, r.off), RecordChunk { off: r.off, len: r.len, born: r.born });
        if !r.counted() {
            // Its records, as `push_recycled` took them off (not the header and slack).
            self.st.dead_bytes += r.dead;
        }
    }

    /// Marks `recycled[i]` as zeroed at generation `z`, waiting for a sync (see
    /// [`Recycled::counted`]).
    fn wait_zeroed(&mut self, i: usize, z: u64) {
        let st = &mut *self.st;
        let r = &mut st.recycled[i];
        if !r.counted() {
            st.dead_bytes += r.dead;
        }
        r.wait = Wait::Zeroed(z);
    }

    /// Hands the recycled chunks whose grace period has passed to the file's free space (for
    /// `close`, which punches it before it syncs; the others stay what they are on disk,
    /// valid chunks of this shard whose records newer ones override). Except a chunk whose
    /// records a sync may have promised while the records that replaced them may not be on
    /// the disk yet (`Wait::Dead`, no sync completed since): punched now, a crash could lose
    /// both, so it stays a dead chunk of the shard, for a rebuild to free.
    pub(crate) fn release_recycled(&mut self) {
        let synced = self.ctx.region.synced_generation();
        for r in std::mem::take(&mut self.st.recycled) {
            if !self.ctx.epochs.is_safe(r.epoch) {
                self.st.recycled.push(r);
            } else if matches!(r.wait, Wait::Dead(d) if synced <= d) {
                self.unrecycle(r);
            } else {
                if r.counted() {
                    self.st.dead_bytes = self.st.dead_bytes.saturating_sub(r.dead);
                }
                self.ctx.free.add(r.off, r.len);
            }
        }
    }

    /// Bytes of all of the shard's recycled chunks (for tests).
    #[cfg(test)]
    pub(super) fn all_recycled_bytes(&self) -> u64 {
        self.st.recycled.iter().map(|r| r.len).sum()
    }

    /// Bytes of the shard's recycled chunks that it can reuse at once (free space only this
    /// shard reuses; those waiting for a sync count as dead records).
    pub(crate) fn recycled_bytes(&self) -> u64 {
        self.st.recycled.iter().filter(|r| !r.counted()).map(|r| r.len).sum()
    }
}
