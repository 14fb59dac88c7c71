//! The read-retry policy: how many times a page that fails its checksum is read before the
//! failure is final. Every layer above reads through [`Flash::read_retrying`], so a page is
//! retried in one place and a corrupt page costs exactly [`READ_ATTEMPTS_MAX`] reads, never a
//! product of nested retries.
//!
//! Why retry at all: a bit flipped on the way out of the array (see the fault model in
//! `fault.rs`) fails the checksum once and reads correctly again, as controllers' read retry
//! assumes. A torn or damaged page fails every time and is reported, never returned as data.

use crate::{Flash, FlashError, PageAddress, PageRead, Purpose, Result, SimTime};

/// Reads of one page tried before a checksum failure ([`FlashError::Corrupt`]) is returned.
pub const READ_ATTEMPTS_MAX: u32 = 8;

const _: () = assert!(READ_ATTEMPTS_MAX >= 1, "a page is read at least once");

impl Flash {
    /// [`Flash::read`], retried while the page fails its checksum, at most [`READ_ATTEMPTS_MAX`]
    /// reads in all. Every attempt is issued at `at` and counted under `purpose`; any other error
    /// is returned at once.
    pub fn read_retrying(
        &mut self,
        at: SimTime,
        page: PageAddress,
        purpose: Purpose,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<PageRead> {
        let mut attempt = 1;
        loop {
            match self.read(at, page, purpose, data, oob) {
                Err(FlashError::Corrupt { .. }) if attempt < READ_ATTEMPTS_MAX => attempt += 1,
                other => return other,
            }
        }
    }
}
