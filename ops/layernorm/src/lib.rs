#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx))]
