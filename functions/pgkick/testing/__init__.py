"""pgkick.testing: run an app's tasks in its own tests, the way a worker runs them.

Why a package: the modes (`inline`, `manual`: pgkick.testing.modes), the
assertions on enqueued jobs (pgkick.testing.asserts), the databases of the pytest
plugin (pgkick.testing.databases, and pgkick.testing.leftovers: a killed session's
dropped by the next) and the plugin itself (pgkick.testing.plugin, registered as the
`pytest11` entry point `pgkick`) are four concerns an app meets in that order;
`from pgkick import testing` keeps giving the modes.
"""

from pgkick.testing.asserts import ANY
from pgkick.testing.modes import OPTIONS, TestQueue, inline, manual

__all__ = ["ANY", "OPTIONS", "TestQueue", "inline", "manual"]
