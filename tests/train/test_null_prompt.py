"""The null prompt read with numpy: every float type embed.dtype may save, bfloat16 included
(safetensors.numpy cannot read it), gives torch's float32 values exactly."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import save_file

from linefuse.train.null_prompt import float32_tensor


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_a_prompt_table_of_any_float_type_reads_as_torch_widens_it(tmp_path, dtype):
    table = (torch.randn(3, 5, 8) * 7).to(dtype)
    save_file({"embeddings": table, "other": torch.ones(2)}, str(tmp_path / "prompts.safetensors"))
    read = float32_tensor(tmp_path / "prompts.safetensors", "embeddings")
    assert read.dtype.name == "float32" and read.shape == (3, 5, 8)
    assert torch.equal(torch.from_numpy(read.copy()), table.to(torch.float32))
