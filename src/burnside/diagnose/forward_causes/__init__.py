"""The causes D010 names when a forward computes otherwise from an identical start, each measured by
forensics and said here as (evidence, fix): one module per kind of cause."""
