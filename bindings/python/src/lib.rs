//! `senju._senju`: the native half of the Python package `senju` (PyO3, built by maturin).
//!
//! The Python half (`python/senju/__init__.py`) subclasses `db::PyDb` as `senju.Db`, adds
//! the `collections.abc.MutableMapping` methods, and defines the exception classes.
//!
//! Invariants: every object is frozen and `Sync` and keeps no state that relies on the GIL
//! (the module declares `gil_used = false` for free-threaded CPython); inputs are borrowed
//! from immutable `bytes` or copied before the GIL is released, and results are built after
//! it is taken back; no Python code runs while a store lock is held. The GIL policy is in
//! the `gil` module.

mod convert;
mod db;
mod errors;
mod gil;
mod scan;

use pyo3::prelude::*;

#[pymodule(gil_used = false)]
fn _senju(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<db::PyDb>()?;
    m.add_class::<scan::Scan>()?;
    m.add("MAX_KEY_LEN", senju::MAX_KEY_LEN)?;
    m.add("MAX_VALUE_LEN", senju::MAX_VALUE_LEN)?;
    m.add("LARGE_VALUE", gil::LARGE)?;
    m.add("SCAN_CHUNK", scan::CHUNK)?;
    m.add("SCAN_CHUNK_BYTES", scan::CHUNK_BYTES)?;
    m.add("BATCH_CHUNK", db::BATCH_CHUNK)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
