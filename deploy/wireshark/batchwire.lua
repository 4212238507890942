-- SPDX-License-Identifier: BSD-3-Clause
--
-- Wireshark / tshark dissector for batchwire protocol v1 (docs/protocol.md; include/batchwire/wire.h
-- is the layout): the 40-byte header, the tensor descriptors of INFER bodies, the padding of a
-- request that pads itself, the authentication trailer, and error messages. Every integer is
-- little-endian. UDP port 7878 by default; "Decode As..." for another.
--
-- Install (per user):  mkdir -p ~/.local/lib/wireshark/plugins && cp batchwire.lua "$_"
-- One run:             tshark -X lua_script:deploy/wireshark/batchwire.lua -r capture.pcap -V
-- Filters:             bw, bw.opcode == 2, bw.status != 0, bw.request_id == 42, bw.tensor.name

local bw = Proto("bw", "batchwire protocol v1")

local opcodes = { [1] = "PING", [2] = "INFER", [3] = "MODEL_INFO",
                  [0x81] = "PING reply", [0x82] = "INFER reply", [0x83] = "MODEL_INFO reply" }
local statuses = { [0] = "OK", [1] = "INVALID_ARGUMENT", [2] = "NOT_FOUND", [3] = "RESOURCE_EXHAUSTED",
                   [4] = "DEADLINE_EXCEEDED", [5] = "UNAVAILABLE", [6] = "INTERNAL", [7] = "UNAUTHENTICATED",
                   [8] = "UNIMPLEMENTED" }
local dtypes = { [1] = "FLOAT", [2] = "UINT8", [3] = "INT8", [4] = "UINT16", [5] = "INT16", [6] = "INT32",
                 [7] = "INT64", [9] = "BOOL", [10] = "FLOAT16", [11] = "DOUBLE", [12] = "UINT32",
                 [13] = "UINT64", [16] = "BFLOAT16" }

local f = bw.fields
f.magic = ProtoField.uint32("bw.magic", "Magic", base.HEX)
f.version = ProtoField.uint8("bw.version", "Version")
f.opcode = ProtoField.uint8("bw.opcode", "Opcode", base.HEX, opcodes)
f.status = ProtoField.uint16("bw.status", "Status", base.DEC, statuses)
f.request_id = ProtoField.uint64("bw.request_id", "Request id")
f.model_id = ProtoField.uint32("bw.model_id", "Model id")
f.deadline_us = ProtoField.uint32("bw.deadline_us", "Deadline budget (us)")
f.priority = ProtoField.uint8("bw.priority", "Priority")
f.flags = ProtoField.uint8("bw.flags", "Flags", base.HEX)
f.flag_auth = ProtoField.bool("bw.flags.auth", "AUTH", 8, nil, 0x01)
f.flag_padded = ProtoField.bool("bw.flags.padded", "PADDED", 8, nil, 0x02)
f.flag_draining = ProtoField.bool("bw.flags.draining", "DRAINING", 8, nil, 0x04)
f.num_tensors = ProtoField.uint16("bw.num_tensors", "Tensors")
f.body_len = ProtoField.uint32("bw.body_len", "Body length")
f.seg_index = ProtoField.uint16("bw.seg_index", "Segment index")
f.seg_count = ProtoField.uint16("bw.seg_count", "Segment count")
f.total_body_len = ProtoField.uint32("bw.total_body_len", "Total body length")
f.body = ProtoField.bytes("bw.body", "Body")
f.message = ProtoField.string("bw.message", "Error message")
f.tensor = ProtoField.none("bw.tensor", "Tensor")
f.t_index = ProtoField.uint16("bw.tensor.index", "Index")
f.t_dtype = ProtoField.uint8("bw.tensor.dtype", "Dtype", base.DEC, dtypes)
f.t_rank = ProtoField.uint8("bw.tensor.rank", "Rank")
f.t_name_len = ProtoField.uint16("bw.tensor.name_len", "Name length")
f.t_data_len = ProtoField.uint32("bw.tensor.data_len", "Data length")
f.t_dims = ProtoField.string("bw.tensor.dims", "Dims")
f.t_name = ProtoField.string("bw.tensor.name", "Name")
f.padding = ProtoField.bytes("bw.padding", "Padding")
f.key_id = ProtoField.uint32("bw.auth.key_id", "Key id")
f.auth_reserved = ProtoField.uint32("bw.auth.reserved", "Reserved")
f.tag = ProtoField.bytes("bw.auth.tag", "Tag (HMAC-SHA256)")

local HDR_LEN, DESC_LEN, TRAILER_LEN = 40, 48, 40

-- Tensor descriptors (with names) at the start of an unsegmented body; payloads follow them all.
local function tensors(buf, tree, off, body_end, n)
    for i = 1, n do
        if off + DESC_LEN > body_end then return end
        local rank = buf(off + 3, 1):uint()
        local name_len = buf(off + 4, 2):le_uint()
        local dims = {}
        for d = 0, math.min(rank, 8) - 1 do
            dims[#dims + 1] = tostring(buf(off + 16 + 4 * d, 4):le_uint())
        end
        local padded = (name_len + 7) - (name_len + 7) % 8
        local t = tree:add(f.tensor, buf(off, math.min(DESC_LEN + padded, body_end - off)))
        t:add_le(f.t_index, buf(off, 2))
        t:add(f.t_dtype, buf(off + 2, 1))
        t:add(f.t_rank, buf(off + 3, 1))
        t:add_le(f.t_name_len, buf(off + 4, 2))
        t:add_le(f.t_data_len, buf(off + 8, 4))
        t:add(f.t_dims, buf(off + 16, 32), "[" .. table.concat(dims, ",") .. "]")
        local name = ""
        if name_len > 0 and off + DESC_LEN + name_len <= body_end then
            name = buf(off + DESC_LEN, name_len):string()
            t:add(f.t_name, buf(off + DESC_LEN, name_len))
        end
        t:append_text(string.format(" %d: %s %s %s", i - 1, dtypes[buf(off + 2, 1):uint()] or "?",
                                    "[" .. table.concat(dims, ",") .. "]", name))
        off = off + DESC_LEN + padded
    end
end

function bw.dissector(buf, pinfo, tree)
    local len = buf:len()
    if len < HDR_LEN or buf(0, 4):le_uint() ~= 0x52495742 then return 0 end
    pinfo.cols.protocol = "BW"
    local opcode = buf(5, 1):uint()
    local status = buf(6, 2):le_uint()
    local flags = buf(25, 1):uint()
    local n = buf(26, 2):le_uint()
    local body_len = buf(28, 4):le_uint()
    local seg_index, seg_count = buf(32, 2):le_uint(), buf(34, 2):le_uint()
    local t = tree:add(bw, buf(), "batchwire protocol v1")
    t:add_le(f.magic, buf(0, 4))
    t:add(f.version, buf(4, 1))
    t:add(f.opcode, buf(5, 1))
    t:add_le(f.status, buf(6, 2))
    t:add_le(f.request_id, buf(8, 8))
    t:add_le(f.model_id, buf(16, 4))
    t:add_le(f.deadline_us, buf(20, 4))
    t:add(f.priority, buf(24, 1))
    local ft = t:add(f.flags, buf(25, 1))
    ft:add(f.flag_auth, buf(25, 1))
    ft:add(f.flag_padded, buf(25, 1))
    ft:add(f.flag_draining, buf(25, 1))
    t:add_le(f.num_tensors, buf(26, 2))
    t:add_le(f.body_len, buf(28, 4))
    t:add_le(f.seg_index, buf(32, 2))
    t:add_le(f.seg_count, buf(34, 2))
    t:add_le(f.total_body_len, buf(36, 4))

    local info = string.format("%s id=%s model=%d", opcodes[opcode] or string.format("opcode 0x%02x", opcode),
                               tostring(buf(8, 8):le_uint64()), buf(16, 4):le_uint())
    if opcode >= 0x80 then info = info .. " " .. (statuses[status] or tostring(status)) end
    if seg_count > 1 then info = info .. string.format(" segment %d/%d", seg_index + 1, seg_count) end
    pinfo.cols.info = info

    local body_end = math.min(HDR_LEN + body_len, len)
    if body_end > HDR_LEN then
        local b = t:add(f.body, buf(HDR_LEN, body_end - HDR_LEN))
        if opcode >= 0x80 and status ~= 0 then
            b:add(f.message, buf(HDR_LEN, body_end - HDR_LEN))
        elseif (opcode == 2 or opcode == 0x82) and seg_index == 0 then
            tensors(buf, b, HDR_LEN, body_end, n)
        end
    end
    local trailer = (flags % 2 == 1) and TRAILER_LEN or 0
    if flags % 4 >= 2 and len - trailer > body_end then
        t:add(f.padding, buf(body_end, len - trailer - body_end))
    end
    if trailer > 0 and len >= body_end + trailer then
        local a = t:add(bw, buf(len - trailer, trailer), "Authentication trailer")
        a:add_le(f.key_id, buf(len - trailer, 4))
        a:add_le(f.auth_reserved, buf(len - trailer + 4, 4))
        a:add(f.tag, buf(len - trailer + 8, 32))
    end
    return len
end

DissectorTable.get("udp.port"):add(7878, bw)
