from setuptools import find_packages, setup

setup(
    name="pybuda",
    version="0.1.0",
    description="Compile PyTorch models for Tenstorrent Grayskull/Wormhole: netlists, placement, simulation",
    packages=find_packages(include=["pybuda", "pybuda.*"]),
    package_data={"pybuda": ["device/*.yaml", "arch/params/*.yaml", "report/templates/*"]},
    python_requires=">=3.11",
    install_requires=[
        "torch>=2.4",
        "apache-tvm==0.27.*",
        "networkx",
        "pyyaml",
        "numpy",
        "ortools",
        "ml_dtypes",
        "rich",
        "jinja2",
        "matplotlib",
        "ray[default]",
    ],
    extras_require={"test": ["pytest", "pytest-xdist", "hypothesis", "transformers", "import-linter"]},
    entry_points={"console_scripts": ["pybuda=pybuda.tools.cli:main"]},
)
