"""Build hook (hatchling): the wheel carries the top-level data folders as package data.

schemas/, tasks/ and reporters/ stay where they are as the source; a wheel gets a copy of each in
suite/_data/, where suite.paths reads them. An editable install reads them in place (a copy in
site-packages would shadow the package), so the copy is made for the standard wheel only.
"""

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

DATA = ("schemas", "tasks", "reporters")
"""The top-level folders shipped; suite.paths.DATA names the same three."""


class CustomBuildHook(BuildHookInterface):
    def initialize(self, version: str, build_data: dict) -> None:
        if self.target_name == "wheel" and version == "standard":
            build_data["force_include"].update({name: f"suite/_data/{name}" for name in DATA})
