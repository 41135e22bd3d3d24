"""Typed decode errors. `reason` is a short, bounded label (it becomes a metric label)."""


class DecodeError(ValueError):
    """Bytes that are not a valid `__transaction_state` record or record batch."""

    # Every reason a DecodeError can carry; metric sinks may pre-create one series per reason.
    REASONS = (
        "truncated",
        "bad_length",
        "unknown_key_version",
        "unknown_value_version",
        "unknown_state",
        "invalid_utf8",
        "crc_mismatch",
        "unsupported_batch",
    )

    def __init__(self, reason: str, detail: str) -> None:
        assert reason in self.REASONS, reason
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail
