"""Statements in the evaluator: assignment, control flow (undecidable branches run both ways), imports."""

from __future__ import annotations

import ast
from typing import Any

from .runtime import (
    BINOPS,
    PLAIN,
    AbortSignal,
    BreakSignal,
    BudgetExceeded,
    ContinueSignal,
    Frame,
    ReturnSignal,
    is_known,
    merged_scope,
    src_text,
)
from .source import FuncRef, Unknown


class Statements:
    """Mixed into :class:`~.evaluator.Evaluator`; relies on its ``eval``/``call``."""

    # ------------------------------------------------------------- statements
    def exec_block(self, body: list[ast.stmt], frame: Frame) -> None:
        for stmt in body:
            self.exec_stmt(stmt, frame)

    def exec_stmt(self, stmt: ast.stmt, frame: Frame) -> None:
        self.tick()
        try:
            method = getattr(self, "_s_" + type(stmt).__name__, None)
            if method is not None:
                method(stmt, frame)
        except (ReturnSignal, BreakSignal, ContinueSignal, AbortSignal, BudgetExceeded):
            raise
        except RecursionError:
            raise
        except Exception as exc:  # one bad statement must not stop the walk
            self.errors.append(f"{frame.module.name}:{getattr(stmt, 'lineno', '?')}: {type(exc).__name__}: {exc}")

    def _s_Expr(self, stmt: ast.Expr, frame: Frame) -> None:
        self.eval(stmt.value, frame)

    def _s_Assign(self, stmt: ast.Assign, frame: Frame) -> None:
        value = self.eval(stmt.value, frame)
        for target in stmt.targets:
            self.assign(target, value, frame)

    def _s_AnnAssign(self, stmt: ast.AnnAssign, frame: Frame) -> None:
        if stmt.value is not None:
            self.assign(stmt.target, self.eval(stmt.value, frame), frame)

    def _s_AugAssign(self, stmt: ast.AugAssign, frame: Frame) -> None:
        current = self.eval(stmt.target, frame) if not isinstance(stmt.target, ast.Name) \
            else self.lookup(stmt.target.id, frame)
        value = self.eval(stmt.value, frame)
        if isinstance(current, PLAIN) and isinstance(value, PLAIN):
            if isinstance(current, list) and isinstance(stmt.op, ast.Add):
                current.extend(value)  # in place, like Python
                result = current
            else:
                result = BINOPS[type(stmt.op)](current, value)
        else:
            result = Unknown(src_text(stmt))
        self.assign(stmt.target, result, frame)

    def assign(self, target: ast.expr, value: Any, frame: Frame) -> None:
        if isinstance(target, ast.Name):
            frame.locals[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            items = self.iterate(value)
            if items is None or len(items) != len(target.elts):
                items = [Unknown(src_text(e)) for e in target.elts]
            for t, v in zip(target.elts, items):
                self.assign(t, v, frame)
        elif isinstance(target, ast.Subscript):
            container = self.eval(target.value, frame)
            key = self.eval(target.slice, frame)
            if isinstance(container, (dict, list)) and not isinstance(key, Unknown):
                container[key] = value
        elif isinstance(target, ast.Attribute):
            obj = self.eval(target.value, frame)
            if hasattr(obj, "set_attr"):
                obj.set_attr(target.attr, value)

    def _s_Delete(self, stmt: ast.Delete, frame: Frame) -> None:
        for target in stmt.targets:
            if isinstance(target, ast.Subscript):
                container = self.eval(target.value, frame)
                key = self.eval(target.slice, frame)
                if isinstance(container, dict) and key in container:
                    del container[key]
            elif isinstance(target, ast.Name):
                frame.locals.pop(target.id, None)

    def _s_Return(self, stmt: ast.Return, frame: Frame) -> None:
        value = self.eval(stmt.value, frame) if stmt.value is not None else None
        if frame.speculative:
            # a return inside an undecided branch: keep walking the rest of the body
            frame.locals.setdefault("<speculative-return>", value)
            return
        raise ReturnSignal(value)

    def _s_If(self, stmt: ast.If, frame: Frame) -> None:
        test = self.eval(stmt.test, frame)
        if is_known(test):
            self.exec_block(stmt.body if test else stmt.orelse, frame)
            return
        frame.speculative += 1
        try:
            self.exec_block(stmt.body, frame)
            self.exec_block(stmt.orelse, frame)
        finally:
            frame.speculative -= 1

    def _s_For(self, stmt: ast.For, frame: Frame) -> None:
        items = self.iterate(self.eval(stmt.iter, frame))
        if items is None:
            return
        for item in items:
            self.assign(stmt.target, item, frame)
            try:
                self.exec_block(stmt.body, frame)
            except BreakSignal:
                return
            except ContinueSignal:
                continue
        self.exec_block(stmt.orelse, frame)

    def _s_Break(self, stmt: ast.Break, frame: Frame) -> None:
        raise BreakSignal()

    def _s_Continue(self, stmt: ast.Continue, frame: Frame) -> None:
        raise ContinueSignal()

    def _s_With(self, stmt: ast.With, frame: Frame) -> None:
        self.exec_block(stmt.body, frame)

    def _s_Try(self, stmt: ast.Try, frame: Frame) -> None:
        self.exec_block(stmt.body, frame)
        self.exec_block(stmt.orelse, frame)
        self.exec_block(stmt.finalbody, frame)

    def _s_Raise(self, stmt: ast.Raise, frame: Frame) -> None:
        if not frame.speculative:
            raise AbortSignal()

    def _s_FunctionDef(self, stmt: ast.FunctionDef, frame: Frame) -> None:
        frame.locals[stmt.name] = FuncRef(frame.module, stmt, closure=merged_scope(frame))

    _s_AsyncFunctionDef = _s_FunctionDef

    def _s_Import(self, stmt: ast.Import, frame: Frame) -> None:
        for alias in stmt.names:
            if alias.asname:
                frame.locals[alias.asname] = self.import_module(alias.name)
            else:
                top = alias.name.split(".")[0]
                frame.locals[top] = self.import_module(top)

    def _s_ImportFrom(self, stmt: ast.ImportFrom, frame: Frame) -> None:
        base = frame.module._absolute(stmt.module, stmt.level)
        for alias in stmt.names:
            if alias.name != "*":
                frame.locals[alias.asname or alias.name] = self.import_from(base, alias.name)

