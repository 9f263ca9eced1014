//! Shared pieces of the end-to-end tests, copied from weft-tap's (namespaces and commands in
//! `lab`, the switch worker in `runner`). Not every test binary uses every helper.
#![allow(dead_code, unreachable_pub)]

pub use weft_testlab::lab;
pub use weft_testlab::runner;
