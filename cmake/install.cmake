# `cmake --install build --prefix P`: the programs, libmegacpp, its headers and a CMake package,
# so that a project outside the tree does find_package(megacpp) and links megacpp::megacpp
# (examples/custom_model, docs/custom_models.md).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS megacpp megacpp_io megacpp_serialization EXPORT megacppTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS megacpp-train megacpp-run megacpp-preprocess megacpp-convert megacpp-caption megacpp-answer megacpp-infer megacpp-grpo
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# Loaded at run time from ../lib beside the programs (Note [SentencePiece in its own scope]).
install(TARGETS megacpp_sentencepiece LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
# The headers under include/megacpp/, each folder as in the tree (what they include names them so).
foreach(folder megacpp io parallel models checkpoint settings runtime training inference rl launch)
  install(DIRECTORY ${CMAKE_SOURCE_DIR}/${folder} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/megacpp
    FILES_MATCHING PATTERN "*.h" PATTERN "pch.h" EXCLUDE)
endforeach()
install(EXPORT megacppTargets NAMESPACE megacpp:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/megacpp)
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/megacppConfig.cmake.in
  ${CMAKE_BINARY_DIR}/megacppConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/megacpp)
install(FILES ${CMAKE_BINARY_DIR}/megacppConfig.cmake DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/megacpp)
