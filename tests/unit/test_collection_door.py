"""rdmaprov/collection.py: the collection's module_utils under the names Ansible gives them."""

from __future__ import annotations

import pytest

from rdmaprov import collection
from rdmaprov.resources import collection_root


def test_each_module_is_the_one_the_module_utils_import_each_other_by() -> None:
    # rdma_sysfs imports kernel_caps the collection way: one module, not a second copy.
    assert collection.rdma_sysfs.kernel_caps is collection.kernel_caps
    assert collection.kernel_caps.__name__ == f"{collection.PACKAGE}.kernel_caps"


def test_the_names_are_exactly_the_files_in_module_utils() -> None:
    files = {p.stem for p in (collection_root() / "plugins" / "module_utils").glob("*.py")}
    assert files == collection.MODULE_UTILS


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_util"):
        _ = collection.no_such_util  # type: ignore[attr-defined]
