//! The engine layer of kvssd.
