"""Thread-block groups: one op split over several blocks (``tbg_info``, plan-format §3.7)."""

from .internal.types import DSLError


class ThreadBlockGroup:
    def __init__(self, tb_list):
        tb_list = list(tb_list)
        if not tb_list:
            raise DSLError("ThreadBlockGroup needs at least one thread block")
        if len(set(tb_list)) != len(tb_list):
            raise DSLError(f"ThreadBlockGroup: duplicate thread blocks in {tb_list}")
        for t in tb_list:
            if not isinstance(t, int) or t < 0:
                raise DSLError(f"ThreadBlockGroup: bad thread block {t!r}")
        self.tb_list = tb_list
        self._ids = {t: i for i, t in enumerate(tb_list)}

    def get_internal_id(self, tb):
        try:
            return self._ids[tb]
        except KeyError:
            raise DSLError(f"thread block {tb} is not in the group {self.tb_list}") from None

    def numtb(self):
        return len(self.tb_list)

    def __repr__(self):
        return f"ThreadBlockGroup({self.tb_list})"
