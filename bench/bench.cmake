# Benchmarks' helper programs (bench/*.py run them). Included from the top
# CMakeLists.txt after the libraries are defined, because they link drun_proto.
if(DRUN_BUILD_TESTS)
  # bench/rendezvous_bench.py: thousands of simulated agents on one rendezvous server.
  add_executable(drun_rdzv_load ${PROJECT_SOURCE_DIR}/bench/rdzv_load.cc)
  target_link_libraries(drun_rdzv_load PRIVATE drun_rendezvous drun_tls drun_proto gRPC::grpc++ Threads::Threads)
endif()
