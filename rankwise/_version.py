"""rankwise's version, in a module of its own so that importing it never runs the
package's ``__init__`` (which imports the SDK): ``session``, ``_http`` and the server
read it from here, and the build reads it from here too (pyproject.toml)."""

__version__ = "0.1.0"
