//! The space layer of kvssd.
