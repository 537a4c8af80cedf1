//! HTTP resources, one file each.
