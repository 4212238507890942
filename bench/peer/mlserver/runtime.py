# SPDX-License-Identifier: BSD-3-Clause
# An MLServer model runtime that runs an ONNX file through onnxruntime on one thread: the peer that
# bench/peer/peer_vs_batchwire.sh sets against batchwire. MLServer's adaptive batching merges
# requests along the first dimension before predict() and splits the outputs after it.
import numpy as np
import onnxruntime as ort
from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.types import InferenceRequest, InferenceResponse
from mlserver.utils import get_model_uri


class OnnxRuntimeModel(MLModel):
    async def load(self) -> bool:
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        path = await get_model_uri(self._settings)  # the uri, relative to model-settings.json
        self._session = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
        self._output_names = [o.name for o in self._session.get_outputs()]
        return True

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        feeds = {i.name: NumpyCodec.decode_input(i).astype(np.float32, copy=False) for i in payload.inputs}
        results = self._session.run(self._output_names, feeds)
        return InferenceResponse(
            model_name=self.name,
            id=payload.id,
            outputs=[NumpyCodec.encode_output(n, r) for n, r in zip(self._output_names, results)],
        )
