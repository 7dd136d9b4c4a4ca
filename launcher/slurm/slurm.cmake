# Slurm: auto-configuration under srun (slurm_env) and --launcher slurm (slurm_launcher).
# Included from launcher/CMakeLists.txt (build outputs stay in the launcher/ build dir);
# sources are named from CMAKE_CURRENT_LIST_DIR, this file's folder.
find_package(OpenSSL REQUIRED)  # SHA-256 for the derived job token (libssl-dev)

add_library(drun_slurm STATIC
  ${CMAKE_CURRENT_LIST_DIR}/slurm_env.cc
  ${CMAKE_CURRENT_LIST_DIR}/slurm_launcher.cc
  ${CMAKE_CURRENT_LIST_DIR}/srun_relay.cc)
target_include_directories(drun_slurm PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(drun_slurm PUBLIC drun_base drun_cli drun_jobhost drun_hosts drun_agent drun_host_console
  drun_rendezvous_server
  OpenSSL::Crypto absl::status absl::statusor absl::strings)

if(DRUN_BUILD_TESTS)
  include(GoogleTest)
  add_executable(slurm_env_test ${PROJECT_SOURCE_DIR}/tests/unit/slurm_env_test.cc)
  target_link_libraries(slurm_env_test PRIVATE drun_slurm GTest::gmock GTest::gtest_main)
  # The prefix keeps `ctest -R slurm` selecting these (gtest names are CamelCase).
  gtest_discover_tests(slurm_env_test TEST_PREFIX "slurm_env_test." DISCOVERY_TIMEOUT 30)
  add_executable(srun_relay_test ${PROJECT_SOURCE_DIR}/tests/slurm/srun_relay_test.cc)
  target_link_libraries(srun_relay_test PRIVATE drun_slurm GTest::gtest_main)
  gtest_discover_tests(srun_relay_test TEST_PREFIX "slurm.srun_relay_test." DISCOVERY_TIMEOUT 30
                       PROPERTIES LABELS unit)
endif()
