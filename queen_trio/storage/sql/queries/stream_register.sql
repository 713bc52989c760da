-- POST /streams/v1/queries (queen.stream_register).
SELECT * FROM queen.stream_register(:id::uuid, :name, :source_queue, :sink_queue,
                                    :config_hash, :reset::boolean)
