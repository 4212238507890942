-- SPDX-License-Identifier: BSD-3-Clause
-- wrk script: each request is a KServe v2 JSON inference request (POST /v2/models/mlp/infer) with
-- one row of 784 FP32 values, uniform in [-1, 1) from a fixed seed, the same body every time.
-- done() prints one machine-readable line: wrk requests=N seconds=X rps=X p50_us=X p99_us=X
-- max_us=X non2xx=N socket_errors=N.
local values = {}
local state = 12345
for i = 1, 784 do
	state = (state * 1103515245 + 12345) % 2147483648
	values[i] = string.format("%.6f", state / 1073741824 - 1)
end
wrk.method = "POST"
wrk.path = "/v2/models/mlp/infer"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"inputs":[{"name":"input","shape":[1,784],"datatype":"FP32","data":['
	.. table.concat(values, ",") .. ']}]}'

function done(summary, latency, requests)
	local e = summary.errors
	local seconds = summary.duration / 1e6
	io.write(string.format("wrk requests=%d seconds=%.3f rps=%.1f p50_us=%.1f p99_us=%.1f max_us=%.1f non2xx=%d socket_errors=%d\n",
		summary.requests, seconds, summary.requests / seconds, latency:percentile(50), latency:percentile(99),
		latency.max, e.status, e.connect + e.read + e.write + e.timeout))
end
