"""The float64 reference's public import path, `burnside.reference` (README, docs/trace-format.md, the package
root's `record_reference`).

The reference is recorded by the record stage, `burnside.recording.reference`; this module only re-exports that
module's public names so that the documented path keeps working.
"""

from __future__ import annotations

from burnside.recording.reference import (
    BURN_ADAM,
    BURN_BATCHNORM,
    BURN_MUON,
    BURN_RMSPROP,
    F32_EPS,
    Float32Constants,
    has_batchnorm,
    has_burn_adam_variant,
    has_burn_muon_variant,
    has_burn_rmsprop_variant,
    record_forward_reference,
    record_generate_reference,
    record_reference,
    reference_files,
    variant_name,
    variant_path,
)

__all__ = ["BURN_ADAM", "BURN_BATCHNORM", "BURN_MUON", "BURN_RMSPROP", "has_burn_muon_variant",
           "has_burn_rmsprop_variant", "F32_EPS", "Float32Constants", "has_batchnorm", "has_burn_adam_variant",
           "record_forward_reference", "record_generate_reference",
           "record_reference", "reference_files", "variant_name", "variant_path"]
