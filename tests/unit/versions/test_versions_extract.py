"""The table generator's source reader, on a miniature vLLM source tree (no network, no vLLM)."""

from __future__ import annotations

import importlib.util
import json
import sys
import textwrap
from pathlib import Path

import pytest

# The extractor is tooling for scripts/gen_flag_tables.py, not part of the installed package.
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
from vllm_flag_extract.release import extract_release  # noqa: E402

FILES = {
    "vllm/__init__.py": "",
    "vllm/_version.py": """
        __version__ = version = '9.9.0'
        __commit_id__ = commit_id = 'gabcdef123'
    """,
    "vllm/config/__init__.py": "from vllm.config.cache import CacheConfig\n",
    "vllm/config/cache.py": '''
        from dataclasses import field
        from typing import Literal, Optional
        from pydantic import SkipValidation
        from pydantic.dataclasses import dataclass

        BlockSize = Literal[8, 16, 32]
        CacheDType = Literal["auto", "fp8"]

        @dataclass
        class CacheConfig:
            block_size: SkipValidation[Optional[BlockSize]] = None
            """Size of a block."""
            gpu_memory_utilization: float = 0.9
            swap_space: float = 4
            """Deprecated: this option will be removed in v9.10."""
            cache_dtype: CacheDType = "auto"
            enable_prefix_caching: bool | None = None
            kv_cache_memory_bytes: int | None = None
            sizes: list[int] = field(default_factory=list)
            extra: dict[str, int] = field(default_factory=dict)
    ''',
    "vllm/utils/__init__.py": "",
    "vllm/utils/argparse_utils.py": r'''
        import argparse
        from argparse import ArgumentParser, BooleanOptionalAction

        def human_readable_int(value):
            return int(value)

        class EnableDisableAction(BooleanOptionalAction):
            pass

        class FlexibleArgumentParser(ArgumentParser):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                self.register("action", BooleanOptionalAction, EnableDisableAction)

            def parse_args(self, args=None, namespace=None):
                pattern = re.compile(r"(?<=--)[^\.]*")
                return super().parse_args(args, namespace)
    ''',
    "vllm/engine/__init__.py": "",
    "vllm/engine/arg_utils.py": '''
        import argparse
        import sys
        from dataclasses import dataclass, fields
        from vllm.config import CacheConfig
        from vllm.utils.argparse_utils import FlexibleArgumentParser, human_readable_int

        def get_kwargs(cls):
            kwargs = {}
            for f in fields(cls):
                name = f.name
                if name in {"kv_cache_memory_bytes"}:
                    kwargs[name] = {"type": human_readable_int}
            return kwargs

        @dataclass
        class EngineArgs:
            model: str = "facebook/opt-125m"
            block_size: int | None = CacheConfig.block_size
            enforce_eager: bool | None = None
            tensor_parallel_size: int = 1

            @staticmethod
            def add_cli_args(parser):
                cache_kwargs = get_kwargs(CacheConfig)
                group = parser.add_argument_group("cache")
                group.add_argument("--model", type=str, default=EngineArgs.model)
                group.add_argument("--tensor-parallel-size", "-tp", type=int,
                                   default=EngineArgs.tensor_parallel_size)
                group.add_argument("--block-size", **cache_kwargs["block_size"])
                group.add_argument("--gpu-memory-utilization", "--device-memory-utilization",
                                   dest="gpu_memory_utilization", **cache_kwargs["gpu_memory_utilization"])
                group.add_argument("--swap-space", **cache_kwargs["swap_space"])
                group.add_argument("--kv-cache-dtype", **cache_kwargs["cache_dtype"])
                group.add_argument("--enable-prefix-caching", **cache_kwargs["enable_prefix_caching"])
                group.add_argument("--kv-cache-memory-bytes", **cache_kwargs["kv_cache_memory_bytes"])
                group.add_argument("--sizes", **cache_kwargs["sizes"])
                group.add_argument("--extra", **{**cache_kwargs["extra"], "default": None})
                group.add_argument("--enforce-eager", action="store_true")
                if "serve" in sys.argv:
                    group.add_argument("--only-when-serving", type=int)
                return parser

        @dataclass
        class AsyncEngineArgs(EngineArgs):
            @staticmethod
            def add_cli_args(parser):
                parser = EngineArgs.add_cli_args(parser)
                parser.add_argument("--enable-log-requests", action=argparse.BooleanOptionalAction,
                                    default=False)
                parser.add_argument("--disable-log-requests", action="store_false",
                                    dest="enable_log_requests", deprecated=True)
                return parser
    ''',
    "vllm/entrypoints/__init__.py": "",
    "vllm/entrypoints/openai/__init__.py": "",
    "vllm/entrypoints/openai/cli_args.py": '''
        from dataclasses import dataclass
        from vllm.engine.arg_utils import AsyncEngineArgs, get_kwargs

        @dataclass
        class FrontendArgs:
            host: str | None = None
            port: int = 8000

            @classmethod
            def add_cli_args(cls, parser):
                kwargs = get_kwargs(cls)
                group = parser.add_argument_group(cls.__name__)
                for key, value in kwargs.items():
                    group.add_argument(f"--{key.replace('_', '-')}", **value)
                return parser

        def make_arg_parser(parser):
            parser.add_argument("--config", help="Read CLI options from a config file.")
            parser = FrontendArgs.add_cli_args(parser)
            parser = AsyncEngineArgs.add_cli_args(parser)
            return parser
    ''',
    "vllm/entrypoints/cli/__init__.py": "",
    "vllm/entrypoints/cli/serve.py": '''
        from vllm.entrypoints.openai.cli_args import make_arg_parser

        class ServeSubcommand:
            name = "serve"

            def subparser_init(self, subparsers):
                serve_parser = subparsers.add_parser(self.name, help="serve")
                serve_parser.add_argument("model_tag", nargs="?")
                return make_arg_parser(serve_parser)
    ''',
    "vllm/envs.py": '''
        import os
        from typing import TYPE_CHECKING

        if TYPE_CHECKING:
            VLLM_USE_V1: bool = True
            VLLM_CPU_KVCACHE_SPACE: int | None = None
            VLLM_CACHE_ROOT: str = "~/.cache/vllm"
            VLLM_WORKSPACE: int = 0

        def get_default_cache_root():
            return os.getenv("XDG_CACHE_HOME", os.path.join(os.path.expanduser("~"), ".cache"))

        environment_variables = {
            "VLLM_USE_V1": lambda: bool(int(os.getenv("VLLM_USE_V1", "1"))),
            "VLLM_CPU_KVCACHE_SPACE": lambda: int(os.getenv("VLLM_CPU_KVCACHE_SPACE", "0")) or None,
            "VLLM_CACHE_ROOT": lambda: os.path.expanduser(
                os.getenv("VLLM_CACHE_ROOT", os.path.join(get_default_cache_root(), "vllm"))),
            "VLLM_WORKSPACE": lambda: int(os.getenv("VLLM_WORKSPACE", str(394 * 1024 * 1024))),
            "VLLM_ALLOW_LONG": lambda: os.environ.get("VLLM_ALLOW_LONG", "0").strip().lower() in ("1", "true"),
            "VLLM_OPAQUE": lambda: some_helper_that_does_not_exist(),
        }
    ''',
}


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    root = tmp_path_factory.mktemp("src")
    for rel, text in FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return extract_release(root)


def _flags(table):
    return {f["dest"]: f for f in table["flags"]}


def test_metadata_and_parser_behaviour(table):
    assert table["version"] == "9.9.0" and table["commit"] == "abcdef123"
    assert table["entry"] == "vllm/entrypoints/cli/serve.py"
    assert table["parser"]["underscores"] == "before_dot"
    assert table["parser"]["enable_disable"] is True


def test_config_dataclass_fields_become_flags(table):
    f = _flags(table)
    assert f["block_size"]["type"] == "int" and f["block_size"]["choices"] == [8, 16, 32, None]
    assert f["gpu_memory_utilization"]["options"] == ["--gpu-memory-utilization", "--device-memory-utilization"]
    assert f["gpu_memory_utilization"]["default"] == 0.9 and f["gpu_memory_utilization"]["type"] == "float"
    assert f["kv_cache_dtype"]["choices"] == ["auto", "fp8"]  # dest from the option, not the field
    assert f["kv_cache_memory_bytes"]["type"] == "size"
    assert f["sizes"]["type"] == "list" and f["sizes"]["item"] == "int" and f["sizes"]["nargs"] == "+"
    assert f["extra"]["type"] == "json" and f["extra"]["default"] is None


def test_booleans_and_enable_disable_inverses(table):
    f = _flags(table)
    assert f["enable_prefix_caching"]["takes_value"] is False
    assert set(f["enable_prefix_caching"]["neg"]) == {"--no-enable-prefix-caching", "--disable-prefix-caching"}
    assert f["enforce_eager"]["options"] == ["--enforce-eager"] and f["enforce_eager"]["default"] is False
    assert f["enforce_eager"]["engine_default"] is None  # EngineArgs starts at None


def test_same_dest_store_false_merges_as_negative(table):
    f = _flags(table)["enable_log_requests"]
    assert "--disable-log-requests" in f["neg"] and f["default"] is False
    assert f["deprecated"] is False and "--disable-log-requests" in f["deprecated_options"]


def test_deprecation_from_docstring(table):
    assert _flags(table)["swap_space"]["deprecated"] is True


def test_guarded_registration_is_kept_and_frontend_is_marked(table):
    f = _flags(table)
    assert "only_when_serving" in f
    assert f["port"]["group"] == "frontend" and f["port"]["default"] == 8000
    assert f["config"]["group"] == "frontend"
    assert f["tensor_parallel_size"]["options"] == ["--tensor-parallel-size", "-tp"]
    assert "model_tag" not in f


def test_env_defaults(table):
    env = table["env"]
    assert env["VLLM_USE_V1"] == {"type": "bool", "default": True}
    assert env["VLLM_CPU_KVCACHE_SPACE"]["default"] is None
    assert env["VLLM_CACHE_ROOT"]["default"] == "~/.cache/vllm"
    assert env["VLLM_WORKSPACE"]["default"] == 394 * 1024 * 1024
    assert env["VLLM_ALLOW_LONG"]["default"] is False
    assert env["VLLM_OPAQUE"]["default"] is None and "default_repr" in env["VLLM_OPAQUE"]


def test_generator_renders_compact_loadable_json(table, tmp_path):
    spec = importlib.util.spec_from_file_location(
        "gen_flag_tables", Path(__file__).resolve().parents[3] / "scripts" / "gen_flag_tables.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("gen_flag_tables", module)
    spec.loader.exec_module(module)
    data = dict(table)
    data.pop("_diagnostics", None)
    text = module.render(data)
    parsed = json.loads(text)
    assert parsed["version"] == "9.9.0"
    lines = text.splitlines()
    assert sum(1 for line in lines if line.strip().startswith('{"dest"')) == len(table["flags"])
    model = next(f for f in parsed["flags"] if f["dest"] == "model")
    assert "neg" not in model and "deprecated" not in model and "group" not in model
