//! Record reads whose flash read runs without the space's lock (file media): the record's page
//! is found and its read issued here, under the caller's lock, and [`DetachedRecord::finish`]
//! reads and decodes it after the lock is released.

use kvssd_flash::{DetachedRead, Purpose, SimTime};

use crate::layout;
use crate::{PageIndex, Record, RecordPointer, Result, Space, SpaceError};

/// A record read: already done, or issued with its flash read left to run.
pub enum RecordRead {
    /// The record (it was in an open page in DRAM, or the media cannot detach a read).
    Ready(Record, SimTime),
    /// The read was issued (timed and counted) and completes at the given time; run it with
    /// [`DetachedRecord::finish`].
    Detached(DetachedRecord, SimTime),
}

/// A record whose page read runs without the space's lock.
pub struct DetachedRecord {
    read: DetachedRead,
    offset: usize,
    page: PageIndex,
}

impl Space {
    /// Reads the record a pointer names as [`Space::read_record`] does, except that on file
    /// media the page read is issued here and performed by [`DetachedRecord::finish`], so the
    /// caller can release its lock first.
    pub fn read_record_detached(
        &mut self,
        at: SimTime,
        pointer: RecordPointer,
        purpose: Purpose,
    ) -> Result<RecordRead> {
        if !self.check_generation(pointer)? {
            return Err(SpaceError::StalePointer(pointer));
        }
        let page = pointer.page();
        if self.open_page_holding(page).is_none() {
            let address = self.page_address(page)?;
            if let Some((read, done)) = self.flash.read_detached(at, address, purpose)? {
                let offset = pointer.chunk() as usize * self.config.chunk_bytes as usize;
                return Ok(RecordRead::Detached(
                    DetachedRecord { read, offset, page },
                    done,
                ));
            }
        }
        let (record, done) = self.read_record(at, pointer, purpose)?;
        Ok(RecordRead::Ready(record, done))
    }
}

impl DetachedRecord {
    /// Reads the page and decodes the record: `None` if the read must be made again under the
    /// lock (the page's block was erased since the read was issued, its checksum failed, or the
    /// record is not a small one inside this page).
    pub fn finish(&self) -> Result<Option<Record>> {
        let Some(data) = self.read.run()? else {
            return Ok(None);
        };
        Ok(layout::decode_small(&data, self.offset, self.page).ok())
    }
}
