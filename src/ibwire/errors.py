"""One error tree for everything ibwire raises.

Every error can say where it happened (record index, byte offset, header, field) and why.
"Need more data" (:class:`TruncatedError`) is kept apart from "the bytes are wrong"
(:class:`MalformedError`), as dpkt separates NeedData from UnpackError.
"""

from __future__ import annotations


class IbwireError(Exception):
    """Root of every error ibwire raises on purpose."""

    def __init__(
        self,
        reason: str,
        *,
        header: str | None = None,
        field: str | None = None,
        offset: int | None = None,
        record: int | None = None,
    ) -> None:
        self.reason = reason
        self.header = header
        self.field = field
        self.offset = offset
        self.record = record
        super().__init__(self._message())

    def _message(self, with_record: bool = True) -> str:
        where = []
        if self.record is not None and with_record:
            where.append(f"record {self.record}")
        if self.header is not None:
            where.append(f"{self.header}.{self.field}" if self.field else self.header)
        if self.offset is not None:
            where.append(f"byte {self.offset}")
        return f"{self.reason} ({', '.join(where)})" if where else self.reason

    def in_record(self) -> str:
        """The message without the record number, for a line that starts with it."""
        return self._message(with_record=False)

    def at_record(self, record: int) -> IbwireError:
        """Return the same error tagged with the capture record it came from."""
        self.record = record
        self.args = (self._message(),)
        return self

    def cut_by_capture(self, caplen: int, orig_len: int) -> IbwireError:
        """Say so when a frame the capture cut short (caplen < orig_len) is truncated: the
        length fields are then not lying, the capture kept too few bytes."""
        if isinstance(self, TruncatedError) and caplen < orig_len:
            self.reason = (f"frame cut by the capture ({caplen} of {orig_len} bytes kept): "
                           f"{self.reason}")
            self.args = (self._message(),)
        return self


class TruncatedError(IbwireError):
    """The bytes end before the structure does: more data would be needed."""


class ShrunkError(TruncatedError):
    """The capture file ``name`` got shorter while it was being read (log rotation, another
    process truncating it): the data ends early, as in a capture cut short. Its message
    names the file, as a :class:`CaptureError`'s does; :meth:`in_record` leaves the file
    out with the record (a line that starts with both)."""

    def __init__(self, reason: str, *, name: str | None = None, header: str | None = None,
                 field: str | None = None, offset: int | None = None,
                 record: int | None = None) -> None:
        self.name = name
        super().__init__(reason, header=header, field=field, offset=offset, record=record)

    def _message(self, with_record: bool = True) -> str:
        text = super()._message(with_record)
        return f"{self.name}: {text}" if with_record and self.name is not None else text


class MalformedError(IbwireError):
    """The bytes are all there but contradict the protocol (a lying length, bad PadCnt, ...)."""


class UnknownOpcodeError(MalformedError):
    """A reserved or manufacturer-specific BTH opcode, raised only with ``strict=True``."""


class UnknownAttributeError(MalformedError):
    """A MAD attribute ibwire does not decode in a class it does, raised only with
    ``strict=True`` (otherwise its bytes stay in the payload, with a warning)."""


class UnsupportedError(IbwireError):
    """Valid on the wire but not handled (for example an IPv6 extension header before UDP)."""


class BuildError(IbwireError):
    """Values that cannot be built into a frame (out of range, unknown field, bad opcode)."""


class CaptureError(IbwireError):
    """A capture file that cannot be read: bad magic, corrupt block, lying record length."""


class NotInfinibandError(IbwireError):
    """The frame carries no InfiniBand transport packet (other traffic, or a raw LRH packet)."""
