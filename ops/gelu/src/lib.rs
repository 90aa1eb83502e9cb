//! Placeholder until this op's stages land.
#![cfg_attr(target_arch = "nvptx64", no_std)]
