//! The port's tests that span modules: rings built by hand and by rust-vmm's mock driver,
//! whole ports looped and switched, hostile neighbours, racing guests, several queue pairs
//! and lanes, and the test rig they share (`testutil.rs`). Tests of one module live beside
//! it.

mod group_tests;
mod hostile_neighbour_tests;
mod lane_tests;
mod loop_tests;
mod mock_driver_tests;
mod mq_tests;
mod proptests;
mod racing_guest_tests;
pub(crate) mod testutil;
