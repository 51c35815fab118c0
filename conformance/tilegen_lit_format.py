"""lit test format for the shared suite: ShTest, except tests tilegen cannot run yet are reported
UNSUPPORTED with the reason from :func:`tilegen.conformance.unsupported_reason`.

Lives in an importable module (not lit.cfg.py) so lit's worker processes can unpickle it."""

import lit.formats
import lit.Test

from tilegen.conformance import unsupported_reason


class TilegenShTest(lit.formats.ShTest):
    def execute(self, test, litConfig):
        reason = unsupported_reason("/".join(test.path_in_suite))
        if reason is not None:
            return lit.Test.Result(lit.Test.UNSUPPORTED, "UNSUPPORTED: " + reason)
        return super().execute(test, litConfig)
